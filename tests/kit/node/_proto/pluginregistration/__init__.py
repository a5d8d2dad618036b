"""Generated protobuf stubs (pluginregistration); see tests/fakes/node/proto/generate.py."""
