"""Generated protobuf stubs (deviceplugin/v1beta1); see proto/generate.py. Never edit by hand."""
