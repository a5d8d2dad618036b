"""Generated protobuf stubs (deviceplugin); see tests/fakes/node/proto/generate.py."""
