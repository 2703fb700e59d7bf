#!/usr/bin/python3
"""A tiny grpcurl: talks to a gRPC server using only server reflection.

    grpcurl.py -plaintext -unix SOCKET list
    grpcurl.py -plaintext -unix SOCKET describe SYMBOL
    grpcurl.py -plaintext -unix SOCKET [-d JSON] SERVICE/METHOD

The only proto it knows in advance is grpc.reflection.v1alpha, read from
Debian's grpc-proto (/usr/share/grpc-proto) through protoc's descriptor set:
no generated code. Everything else (neffd.v1, grpc.health.v1) is learned
from the server, as grpcurl does. Output follows grpcurl: `list` one service
per line, `describe` the proto text of a service, method or message, calls
print each response as JSON (lowerCamelCase names, defaults omitted, two
space indent). Exit 0, or 1 with "ERROR:" and the status like grpcurl.
"""
import subprocess
import sys
import tempfile

import grpc
from google.protobuf import descriptor
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format
from google.protobuf import message_factory

REFLECTION_PROTO = "grpc/reflection/v1alpha/reflection.proto"


def _load_reflection(pool):
    with tempfile.NamedTemporaryFile(suffix=".pb") as out:
        subprocess.run(["protoc", "-I/usr/share/grpc-proto", "-I/usr/include",
                        "--include_imports", "--descriptor_set_out=" + out.name,
                        REFLECTION_PROTO], check=True)
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read())
    for f in files.file:
        pool.Add(f)


class Reflection:
    def __init__(self, channel):
        self.local = descriptor_pool.DescriptorPool()
        _load_reflection(self.local)
        self.factory = message_factory.MessageFactory(self.local)
        self.request_class = self._class(
            "grpc.reflection.v1alpha.ServerReflectionRequest")
        response_class = self._class(
            "grpc.reflection.v1alpha.ServerReflectionResponse")
        self.call = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString)
        self.pool = descriptor_pool.DescriptorPool()
        self.remote_factory = message_factory.MessageFactory(self.pool)
        self.added = set()

    def _class(self, name):
        return self.factory.GetPrototype(self.local.FindMessageTypeByName(name))

    def _ask(self, **fields):
        response = next(iter(self.call(iter([self.request_class(**fields)]))))
        if response.HasField("error_response"):
            raise LookupError(response.error_response.error_message)
        return response

    def services(self):
        response = self._ask(list_services="")
        return sorted(s.name for s in response.list_services_response.service)

    def _add_files(self, response):
        files = [descriptor_pb2.FileDescriptorProto.FromString(b) for b in
                 response.file_descriptor_response.file_descriptor_proto]
        by_name = {f.name: f for f in files}

        def add(f):
            if f.name in self.added:
                return
            for dep in f.dependency:
                if dep in by_name:
                    add(by_name[dep])
                elif dep not in self.added:
                    add_missing(dep)
            self.pool.Add(f)
            self.added.add(f.name)

        def add_missing(name):
            more = self._ask(file_by_filename=name)
            self._add_files(more)

        for f in files:
            add(f)

    def find(self, symbol):
        symbol = symbol.lstrip(".")
        for finder in (self.pool.FindServiceByName,
                       self.pool.FindMessageTypeByName,
                       self.pool.FindEnumTypeByName):
            try:
                return finder(symbol)
            except KeyError:
                pass
        if "." in symbol:
            service, _, method = symbol.rpartition(".")
            try:
                return self.find(service).methods_by_name[method]
            except (KeyError, LookupError, AttributeError):
                pass
        self._add_files(self._ask(file_containing_symbol=symbol))
        for finder in (self.pool.FindServiceByName,
                       self.pool.FindMessageTypeByName,
                       self.pool.FindEnumTypeByName):
            try:
                return finder(symbol)
            except KeyError:
                pass
        raise LookupError("Symbol not found: " + symbol)

    def message_class(self, descriptor):
        return self.remote_factory.GetPrototype(descriptor)


LABELS = {1: "", 2: "", 3: "repeated "}


def _type_name(field):
    if field.message_type is not None:
        if field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields
            return "map<%s, %s>" % (_type_name(key), _type_name(value))
        return "." + field.message_type.full_name
    if field.enum_type is not None:
        return "." + field.enum_type.full_name
    return descriptor_pb2.FieldDescriptorProto.Type.Name(
        field.type)[len("TYPE_"):].lower()


def _describe_message(d, indent=""):
    lines = [indent + "message %s {" % d.name]
    for nested in d.nested_types:
        if not nested.GetOptions().map_entry:
            lines += _describe_message(nested, indent + "  ")
    for enum in d.enum_types:
        lines.append(indent + "  enum %s {" % enum.name)
        lines += [indent + "    %s = %d;" % (v.name, v.number)
                  for v in enum.values]
        lines.append(indent + "  }")
    oneofs = {o.name for o in d.oneofs}
    for field in d.fields:
        label = "" if _type_name(field).startswith("map<") else \
            LABELS[field.label]
        prefix = "  "
        if field.containing_oneof is not None and \
                field.containing_oneof.name in oneofs:
            prefix = "  /* oneof %s */ " % field.containing_oneof.name
        lines.append(indent + "%s%s%s %s = %d;" % (
            prefix, label, _type_name(field), field.name, field.number))
    lines.append(indent + "}")
    return lines


def _method_proto(method):
    proto = descriptor_pb2.MethodDescriptorProto()
    method.CopyToProto(proto)
    return proto


def _server_streaming(method):
    return _method_proto(method).server_streaming


def _rpc_line(m):
    proto = _method_proto(m)
    return "rpc %s ( %s.%s ) returns ( %s.%s );" % (
        m.name, "stream " if proto.client_streaming else "",
        m.input_type.full_name, "stream " if proto.server_streaming else "",
        m.output_type.full_name)


def describe(reflection, symbol):
    d = reflection.find(symbol)
    if isinstance(d, descriptor.ServiceDescriptor):
        print("%s is a service:" % d.full_name)
        print("service %s {" % d.name)
        for m in d.methods:
            print("  " + _rpc_line(m))
        print("}")
    elif isinstance(d, descriptor.MethodDescriptor):
        print("%s is a method:" % d.full_name)
        print(_rpc_line(d))
    elif isinstance(d, descriptor.Descriptor):
        print("%s is a message:" % d.full_name)
        print("\n".join(_describe_message(d)))
    else:
        print("%s is an enum:" % d.full_name)
        print("enum %s {" % d.name)
        for v in d.values:
            print("  %s = %d;" % (v.name, v.number))
        print("}")


def invoke(channel, reflection, target, data):
    service, _, method_name = target.replace("/", ".").rpartition(".")
    method = reflection.find(service).methods_by_name[method_name]
    request = reflection.message_class(method.input_type)()
    json_format.Parse(data or "{}", request)
    response_class = reflection.message_class(method.output_type)
    path = "/%s/%s" % (service, method_name)
    kwargs = dict(request_serializer=lambda m: m.SerializeToString(),
                  response_deserializer=response_class.FromString)
    if _server_streaming(method):
        responses = channel.unary_stream(path, **kwargs)(request, timeout=60)
    else:
        responses = [channel.unary_unary(path, **kwargs)(request, timeout=60)]
    for response in responses:
        print(json_format.MessageToJson(response, indent=2))


def main(argv):
    args = list(argv[1:])
    data = None
    socket = None
    rest = []
    while args:
        a = args.pop(0)
        if a == "-plaintext":
            continue
        if a == "-unix":
            socket = args.pop(0)
        elif a == "-d":
            data = args.pop(0)
        else:
            rest.append(a)
    if socket is None or not rest:
        print(__doc__, file=sys.stderr)
        return 2
    channel = grpc.insecure_channel("unix:" + socket)
    reflection = Reflection(channel)
    try:
        if rest[0] == "list":
            for name in reflection.services():
                print(name)
        elif rest[0] == "describe":
            describe(reflection, rest[1])
        else:
            invoke(channel, reflection, rest[0], data)
    except grpc.RpcError as e:
        print("ERROR:\n  Code: %s\n  Message: %s" % (
            "".join(w.capitalize() for w in e.code().name.split("_")),
            e.details()))
        return 1
    except LookupError as e:
        print("Error invoking method: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
