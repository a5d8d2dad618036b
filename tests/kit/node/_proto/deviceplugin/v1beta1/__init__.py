"""Generated protobuf stubs (deviceplugin/v1beta1); see tests/fakes/node/proto/generate.py."""
