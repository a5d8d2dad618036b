from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ContainerAllocateResponse(_message.Message):
    __slots__ = ("envs", "mounts", "devices", "annotations", "cdi_devices")
    class EnvsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENVS_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    CDI_DEVICES_FIELD_NUMBER: _ClassVar[int]
    envs: _containers.ScalarMap[str, str]
    mounts: _containers.RepeatedCompositeFieldContainer[Mount]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceSpec]
    annotations: _containers.ScalarMap[str, str]
    cdi_devices: _containers.RepeatedCompositeFieldContainer[CDIDevice]
    def __init__(self, envs: _Optional[_Mapping[str, str]] = ..., mounts: _Optional[_Iterable[_Union[Mount, _Mapping]]] = ..., devices: _Optional[_Iterable[_Union[DeviceSpec, _Mapping]]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., cdi_devices: _Optional[_Iterable[_Union[CDIDevice, _Mapping]]] = ...) -> None: ...

class Mount(_message.Message):
    __slots__ = ("container_path", "host_path", "read_only")
    CONTAINER_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    container_path: str
    host_path: str
    read_only: bool
    def __init__(self, container_path: _Optional[str] = ..., host_path: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class DeviceSpec(_message.Message):
    __slots__ = ("container_path", "host_path", "permissions")
    CONTAINER_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    container_path: str
    host_path: str
    permissions: str
    def __init__(self, container_path: _Optional[str] = ..., host_path: _Optional[str] = ..., permissions: _Optional[str] = ...) -> None: ...

class CDIDevice(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...
