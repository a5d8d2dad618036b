"""Generated protobuf stubs (deviceplugin/v1beta1); see tests/kit/node/proto/generate.py."""
