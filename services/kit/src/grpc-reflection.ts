import { createRegistry, type DescFile, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectRouter } from "@connectrpc/connect";
import {
  ServerReflection,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "@rowbase/proto/grpc/reflection/v1/reflection_pb";

type Answer = ServerReflectionResponse["messageResponse"];

/**
 * gRPC server reflection (grpc.reflection.v1) over the descriptors compiled into the service:
 * grpcurl, grpcui and buf curl list the services and fetch their schemas from a running pod.
 * The files answered for a symbol or a name come with every file they import, so one answer is
 * enough to decode any method's messages.
 */
export function registerReflection(router: ConnectRouter, services: DescService[]): void {
  const files = new Map<string, DescFile>();
  const collect = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    for (const dependency of file.dependencies) collect(dependency);
  };
  for (const service of [...services, ServerReflection]) collect(service.file);
  const registry = createRegistry(...files.values());
  const serviceNames = [...services, ServerReflection].map((s) => s.typeName);

  /** The file and everything it imports, imports first (the order a registry is built in). */
  const withImports = (file: DescFile): Answer => {
    const all = new Map<string, DescFile>();
    const walk = (f: DescFile) => {
      if (all.has(f.proto.name)) return;
      for (const dependency of f.dependencies) walk(dependency);
      all.set(f.proto.name, f);
    };
    walk(file);
    return {
      case: "fileDescriptorResponse",
      value: {
        $typeName: "grpc.reflection.v1.FileDescriptorResponse",
        fileDescriptorProto: [...all.values()].map((f) =>
          toBinary(FileDescriptorProtoSchema, f.proto),
        ),
      },
    };
  };
  const notFound = (message: string): Answer => ({
    case: "errorResponse",
    value: {
      $typeName: "grpc.reflection.v1.ErrorResponse",
      errorCode: Code.NotFound,
      errorMessage: message,
    },
  });
  /** A type by its full name, or the service of a method (`package.Service.Method`). */
  const fileOfSymbol = (symbol: string): DescFile | undefined => {
    const type = registry.get(symbol);
    if (type) return type.file;
    const parent = registry.get(symbol.slice(0, Math.max(0, symbol.lastIndexOf("."))));
    if (
      parent?.kind === "service" &&
      parent.methods.some((m) => `${parent.typeName}.${m.name}` === symbol)
    ) {
      return parent.file;
    }
    return undefined;
  };

  const answer = (request: ServerReflectionRequest): Answer => {
    const asked = request.messageRequest;
    switch (asked.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: {
            $typeName: "grpc.reflection.v1.ListServiceResponse",
            service: serviceNames.map((name) => ({
              $typeName: "grpc.reflection.v1.ServiceResponse",
              name,
            })),
          },
        };
      case "fileByFilename": {
        const file = files.get(asked.value);
        return file ? withImports(file) : notFound(`file ${asked.value} not found`);
      }
      case "fileContainingSymbol": {
        const file = fileOfSymbol(asked.value);
        return file ? withImports(file) : notFound(`symbol ${asked.value} not found`);
      }
      case "fileContainingExtension":
        return notFound(
          `extension ${asked.value.extensionNumber} of ${asked.value.containingType} not found`,
        );
      case "allExtensionNumbersOfType": {
        const message = registry.getMessage(asked.value);
        if (!message) return notFound(`type ${asked.value} not found`);
        return {
          case: "allExtensionNumbersResponse",
          value: {
            $typeName: "grpc.reflection.v1.ExtensionNumberResponse",
            baseTypeName: message.typeName,
            extensionNumber: [],
          },
        };
      }
      default:
        return {
          case: "errorResponse",
          value: {
            $typeName: "grpc.reflection.v1.ErrorResponse",
            errorCode: Code.InvalidArgument,
            errorMessage: "no request",
          },
        };
    }
  };

  router.service(ServerReflection, {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield {
          validHost: request.host,
          originalRequest: request,
          messageResponse: answer(request),
        };
      }
    },
  });
}
