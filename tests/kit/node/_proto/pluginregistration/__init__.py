"""Generated protobuf stubs (pluginregistration); see tests/kit/node/proto/generate.py."""
