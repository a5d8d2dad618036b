"""Generated protobuf stubs (pluginregistration/v1); see tests/fakes/node/proto/generate.py."""
