"""Generated protobuf stubs (dra); see tests/kit/node/proto/generate.py."""
