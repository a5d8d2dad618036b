"""Generated protobuf stubs (dra); see tests/fakes/node/proto/generate.py."""
