import type { Logger } from "@rowbase/kit";
import type { ParameterizedContext } from "koa";

/** What the gateway's own middleware leaves on `ctx.state` for the layers below it. */
export interface GatewayState {
  /** The request id echoed in `X-Request-Id` and forwarded to every gRPC call. */
  requestId: string;
  /** The gateway logger bound to this request's id. */
  log: Logger;
}

export type GatewayContext = ParameterizedContext<GatewayState>;
