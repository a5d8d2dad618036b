"""Generated protobuf stubs (pluginregistration/v1); see tests/kit/node/proto/generate.py."""
