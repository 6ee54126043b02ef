import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import {
  type Call,
  Code,
  domainError,
  requestIdOf,
  requirePrincipal,
  requireService,
} from "@rowbase/kit";
import { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { Databases } from "./databases.js";
import type { Fields } from "./fields.js";
import type { Forms } from "./forms.js";
import type { Tables } from "./tables.js";
import { toDatabase, toField, toForm, toTable } from "./wire.js";

export interface CatalogServerDeps {
  databases: Databases;
  tables: Tables;
  fields: Fields;
  forms: Forms;
}

/**
 * The caller of a public RPC that changes the schema. Management routes take a session, never
 * an API token (tokens write records and files only): the gateway answers a token there 401
 * `unauthorized` before it calls, and catalog refuses one the same way (as kit's `requireUser`
 * does), before anything is read or written. Kit's Authorizer treats a `read_write` token as an
 * editor, as records and files need; without this, a token's principal that reached catalog
 * through a new route or a bug could change schemas.
 */
function callOf(ctx: HandlerContext): Call {
  const principal = requirePrincipal(ctx);
  if (principal.kind === "api_token") throw domainError(Code.Unauthenticated, "unauthorized");
  return { principal, requestId: requestIdOf(ctx) };
}

/**
 * The catalog handlers: proto in, rule, proto out. Public RPCs act for the signed user (never an
 * API token, see `callOf`) and authorize through kit's Authorizer; GetTableSchema,
 * ResolveField and ListTableIds answer other services only, GetDatabase answers them too.
 * The caller of a public RPC that reads the schema: a session, or an API token of either
 * access, which may read its own organization's databases, tables and fields (so that an
 * integration, or an AI agent through /mcp, can discover its tables). Kit's Authorizer keeps the
 * token inside its organization: any other's resources are its 404.
 */
function readCallOf(ctx: HandlerContext): Call {
  return { principal: requirePrincipal(ctx), requestId: requestIdOf(ctx) };
}

/**
 * The catalog handlers: proto in, rule, proto out. Public RPCs act for the signed user (writes never
 * for an API token, see `callOf`; reads for one too, see `readCallOf`) and authorize through kit's Authorizer; GetTableSchema and
 * ResolveField answer other services only, GetDatabase answers them too.
 */
export function createRoutes({ databases, tables, fields, forms }: CatalogServerDeps) {
  return (router: ConnectRouter) =>
    router.service(CatalogService, {
      async createDatabase(req, ctx) {
        const database = await databases.create(
          callOf(ctx),
          req.organizationId,
          req.name,
          req.description,
        );
        return { database: toDatabase(database) };
      },
      async getDatabase(req, ctx) {
        return { database: toDatabase(await databases.get(readCallOf(ctx), req.databaseId)) };
      },
      async listDatabases(req, ctx) {
        const rows = await databases.list(readCallOf(ctx), req.organizationId);
        return { databases: rows.map(toDatabase) };
      },
      async updateDatabase(req, ctx) {
        const database = await databases.update(callOf(ctx), req.databaseId, {
          name: req.name,
          description: req.description,
        });
        return { database: toDatabase(database) };
      },
      async deleteDatabase(req, ctx) {
        await databases.delete(callOf(ctx), req.databaseId);
        return { deletedId: req.databaseId };
      },

      async createTable(req, ctx) {
        const view = await tables.create(
          callOf(ctx),
          req.databaseId,
          req.name,
          req.description,
          req.fields,
        );
        return { table: toTable(view.table), fields: view.fields.map(toField) };
      },
      async getTable(req, ctx) {
        const view = await tables.get(readCallOf(ctx), req.tableId);
        return { table: toTable(view.table), fields: view.fields.map(toField) };
      },
      async listTables(req, ctx) {
        return { tables: (await tables.list(readCallOf(ctx), req.databaseId)).map(toTable) };
      },
      async updateTable(req, ctx) {
        const table = await tables.update(callOf(ctx), req.tableId, {
          name: req.name,
          description: req.description,
        });
        return { table: toTable(table) };
      },
      async deleteTable(req, ctx) {
        await tables.delete(callOf(ctx), req.tableId);
        return { deletedId: req.tableId };
      },

      async createField(req, ctx) {
        const definition = req.field ?? {
          name: "",
          type: 0,
          options: undefined,
          required: false,
          description: "",
        };
        return { field: toField(await fields.create(callOf(ctx), req.tableId, definition)) };
      },
      async listFields(req, ctx) {
        return { fields: (await fields.list(readCallOf(ctx), req.tableId)).map(toField) };
      },
      async updateField(req, ctx) {
        const field = await fields.update(callOf(ctx), req.fieldId, {
          name: req.name,
          type: req.type,
          options: req.options,
          required: req.required,
          description: req.description,
          position: req.position,
        });
        return { field: toField(field) };
      },
      async deleteField(req, ctx) {
        await fields.delete(callOf(ctx), req.fieldId);
        return {};
      },

      async getTableSchema(req, ctx) {
        requireService(ctx);
        const schema = await tables.schema(req.tableId);
        return {
          table: toTable(schema.table),
          fields: schema.fields.map(toField),
          organizationId: schema.organizationId,
          schemaVersion: schema.schemaVersion,
        };
      },
      async resolveField(req, ctx) {
        requireService(ctx);
        return fields.home(req.fieldId);
      },
      async listTableIds(req, ctx) {
        requireService(ctx);
        return { tableIds: await tables.ids(req.afterTableId, req.limit) };
      },
      async createForm(req, ctx) {
        const form = await forms.create(callOf(ctx), req.tableId, {
          name: req.name,
          fields: req.fields,
          required: req.required,
          successMessage: req.successMessage,
          redirectUrl: req.redirectUrl,
          active: req.active,
        });
        return { form: toForm(form) };
      },
      async getForm(req, ctx) {
        return { form: toForm(await forms.get(callOf(ctx), req.formId)) };
      },
      async listForms(req, ctx) {
        return { forms: (await forms.list(callOf(ctx), req.tableId)).map(toForm) };
      },
      async updateForm(req, ctx) {
        const form = await forms.update(callOf(ctx), req.formId, {
          name: req.name,
          fields: req.fields?.references,
          required: req.required?.references,
          successMessage: req.successMessage,
          redirectUrl: req.redirectUrl,
          active: req.active,
        });
        return { form: toForm(form) };
      },
      async deleteForm(req, ctx) {
        await forms.delete(callOf(ctx), req.formId);
        return {};
      },
      async getPublicForm(req, ctx) {
        requireService(ctx);
        const { form, fields } = await forms.publicForm(req.formKey);
        return { form: toForm(form), fields: fields.map(toField) };
      },
      async countFormSubmission(req, ctx) {
        requireService(ctx);
        await forms.countSubmission(req.formId);
        return {};
      },
    });
}
