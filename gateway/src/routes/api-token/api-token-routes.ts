import type { Client } from "@connectrpc/connect";
import type { OrganizationService } from "@rowbase/proto/rowbase/organization/v1/organization_service_pb";
import { tokenAccessValue } from "../../presentation/organization-enums.js";
import { defineRoute, type Route } from "../../routing/route.js";
import { presentApiToken } from "./api-token-presenters.js";
import {
  ApiTokenCreateDataSchema,
  ApiTokenCreateSchema,
  ApiTokenIdQuery,
  ApiTokenListSchema,
  ApiTokenOrganizationQuery,
} from "./api-token-schemas.js";

export interface ApiTokenRoutesDeps {
  organization: Client<typeof OrganizationService>;
}

const tags = ["API tokens"];

/**
 * Managing an organization's API tokens (owner or admin, enforced by the
 * service). They take a session only: an API token cannot mint or revoke tokens.
 */
export function apiTokenRoutes({ organization }: ApiTokenRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "POST",
      path: "/api_token/create",
      operationId: "apiTokenCreate",
      summary: "Create an API token; its secret is returned this once",
      tags,
      auth: "session",
      rateLimits: ["org_write_user"],
      query: ApiTokenOrganizationQuery,
      body: ApiTokenCreateSchema,
      response: ApiTokenCreateDataSchema,
      errors: ["organization_not_found", "organization_forbidden"],
      async handle({ query, body, call }) {
        const response = await organization.createApiToken(
          {
            organizationId: query.organization_id,
            name: body.name,
            access: tokenAccessValue(body.access),
          },
          call,
        );
        if (!response.token) throw new Error("the service returned a token without its secret");
        return { api_token: presentApiToken(response.apiToken), token: response.token };
      },
    }),
    defineRoute({
      method: "GET",
      path: "/api_token/list",
      operationId: "apiTokenList",
      summary: "The organization's API tokens, without their secrets",
      tags,
      auth: "session",
      query: ApiTokenOrganizationQuery,
      response: ApiTokenListSchema,
      errors: ["organization_not_found", "organization_forbidden"],
      async handle({ query, call }) {
        const { apiTokens } = await organization.listApiTokens(
          { organizationId: query.organization_id },
          call,
        );
        return { api_tokens: apiTokens.map((token) => presentApiToken(token)) };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/api_token/revoke",
      operationId: "apiTokenRevoke",
      summary: "Revoke an API token; every gateway stops accepting it within 5 seconds",
      tags,
      auth: "session",
      query: ApiTokenIdQuery,
      errors: ["organization_not_found", "organization_forbidden", "api_token_not_found"],
      async handle({ query, call }) {
        await organization.revokeApiToken(
          { organizationId: query.organization_id, tokenId: query.token_id },
          call,
        );
        return {};
      },
    }),
  ];
}
