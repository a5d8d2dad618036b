"""Generated protobuf stubs (dra/v1); see tests/kit/node/proto/generate.py."""
