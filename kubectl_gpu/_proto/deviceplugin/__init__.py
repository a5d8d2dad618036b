"""Generated protobuf stubs (deviceplugin); see proto/generate.py. Never edit by hand."""
