import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

/** A gRPC client of one service at `baseUrl` (`http://host:port`), over one HTTP/2 session. */
export function createServiceClient<S extends DescService>(service: S, baseUrl: string): Client<S> {
  return createClient(service, createGrpcTransport({ baseUrl }));
}
