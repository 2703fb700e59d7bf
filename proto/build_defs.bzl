"""cc_grpc_library: protoc + grpc_cpp_plugin from Debian, as a genrule.

Bazel 4's proto rules want to fetch protobuf; this macro runs the system
protoc instead and wraps the outputs in a cc_library.
"""

def cc_grpc_library(name, srcs, proto_root, deps = [], imports = [], grpc = True, visibility = None):
    """Generates C++ (and optionally gRPC) code for protos under proto_root.

    Args:
      name: the cc_library to create.
      srcs: .proto files, given relative to this package.
      proto_root: the import root of srcs, relative to this package ("" = here).
      deps: cc deps of the generated code (other cc_grpc_library targets).
      imports: .proto files that srcs import (compiled by those deps).
      grpc: also generate *.grpc.pb.{h,cc} service stubs.
      visibility: of the cc_library.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        if proto_root:
            base = base[len(proto_root) + 1:]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    pkg = native.package_name()
    root = pkg + ("/" + proto_root if proto_root else "")
    cmd = ("$(location @system//:protoc) -I" + root + " -I/usr/include -I/usr/share/grpc-proto " +
           "--cpp_out=$(GENDIR)/" + pkg + " ")
    if grpc:
        cmd += ("--grpc_out=$(GENDIR)/" + pkg + " " +
                "--plugin=protoc-gen-grpc=$(location @system//:grpc_cpp_plugin) ")
    native.genrule(
        name = name + "_gen",
        srcs = srcs + imports,
        outs = outs,
        tools = ["@system//:protoc", "@system//:grpc_cpp_plugin"],
        cmd = cmd + " ".join(["$(location " + s + ")" for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = [proto_root or "."],
        deps = deps + (["@system//:grpc"] if grpc else []) + ["@system//:protobuf"],
        copts = ["-Wno-unused-parameter"],
        visibility = visibility,
    )

def cc_grpc_system_library(name, protos, visibility = None):
    """C++ code and gRPC stubs for protos shipped by Debian's grpc-proto.

    Args:
      name: the cc_library to create.
      protos: paths relative to /usr/share/grpc-proto, e.g.
        "grpc/health/v1/health.proto".
      visibility: of the cc_library.
    """
    outs = []
    for p in protos:
        base = p[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc", base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    pkg = native.package_name()
    native.genrule(
        name = name + "_gen",
        outs = outs,
        tools = ["@system//:protoc", "@system//:grpc_cpp_plugin"],
        cmd = ("$(location @system//:protoc) -I/usr/share/grpc-proto -I/usr/include " +
               "--cpp_out=$(GENDIR)/" + pkg + " --grpc_out=$(GENDIR)/" + pkg + " " +
               "--plugin=protoc-gen-grpc=$(location @system//:grpc_cpp_plugin) " +
               " ".join(["/usr/share/grpc-proto/" + p for p in protos])),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = ["@system//:grpc", "@system//:protobuf"],
        copts = ["-Wno-unused-parameter"],
        visibility = visibility,
    )
