"""Generated protobuf stubs (deviceplugin); see tests/kit/node/proto/generate.py."""
