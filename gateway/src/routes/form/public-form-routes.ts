import type { Client } from "@connectrpc/connect";
import { callAs, errorInfoOf, type Logger } from "@rowbase/kit";
import type { CatalogService } from "@rowbase/proto/rowbase/catalog/v1/catalog_service_pb";
import type { RecordsService } from "@rowbase/proto/rowbase/records/v1/records_service_pb";
import { z } from "zod";
import { RPC_TIMEOUT_MS } from "../../auth/downstream-call.js";
import { httpErrorOf } from "../../errors/error-table.js";
import type { GatewayContext } from "../../gateway-context.js";
import { URL_ENCODED } from "../../http/json-body.js";
import { idOf, required } from "../../presentation/wire-values.js";
import { requestBody, responseData } from "../../routing/api-schemas.js";
import { Answered, defineRoute, type Route } from "../../routing/route.js";
import { formPage, notFoundPage, refusedPage, thankYouPage, tooManyPage } from "./form-page.js";
import { checkSubmission, type FormField, formFieldsOf } from "./form-submission.js";

export interface PublicFormRoutesDeps {
  catalog: Client<typeof CatalogService>;
  records: Client<typeof RecordsService>;
  internalSecret: string;
  logger: Logger;
}

const tags = ["Forms"];

export const FormKeyPath = z.strictObject({
  form_key: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "must be a form key")
    .describe("The form's key (`form_key`)"),
});

export const FormSubmitSchema = requestBody(
  "FormSubmitSchema",
  z.strictObject({
    data: z
      .record(z.string(), z.unknown())
      .describe(
        "Values keyed by field reference (id or name), of the form's fields only, typed as the " +
          "record routes take them.",
      ),
  }),
  "One record's values. The form's HTML page posts the same as " +
    "`application/x-www-form-urlencoded`, its inputs named by field id; text values are then " +
    "converted by field type.",
);

const id = z.number().int();

export const FormSubmittedSchema = responseData(
  "FormSubmitted",
  z.object({ submitted: z.literal(true) }),
);

export const PublicFormSchema = responseData(
  "PublicForm",
  z.object({
    form: z.object({
      name: z.string(),
      success_message: z.string(),
      fields: z
        .array(
          z.object({
            field_id: id,
            name: z.string(),
            type: z.string().describe("The field's type, as /field routes name it"),
            required: z.boolean().describe("Required by the form or by the table"),
            description: z.string().describe("Empty when none was given (addition)"),
            options: z
              .record(z.string(), z.unknown())
              .describe("The field's options; choices for the select types"),
          }),
        )
        .describe("In the order the form shows them"),
    }),
  }),
);

/** A public form as the routes use it. */
export interface PublicForm {
  formId: bigint;
  organizationId: bigint;
  tableId: bigint;
  name: string;
  successMessage: string;
  redirectUrl: string;
  fields: FormField[];
}

/** The active form of a key (catalog's GetPublicForm, asked as the gateway), or form_not_found. */
export async function publicForm(
  deps: Pick<PublicFormRoutesDeps, "catalog" | "internalSecret">,
  formKey: string,
  requestId: string,
): Promise<PublicForm> {
  const response = await deps.catalog.getPublicForm(
    { formKey },
    {
      ...(await callAs(deps.internalSecret, { kind: "service", service: "gateway" }, requestId)),
      timeoutMs: RPC_TIMEOUT_MS,
    },
  );
  const form = required(response.form, "form");
  return {
    formId: form.formId,
    organizationId: form.organizationId,
    tableId: form.tableId,
    name: form.name,
    successMessage: form.successMessage,
    redirectUrl: form.redirectUrl,
    fields: formFieldsOf(response.fields, form.required),
  };
}

/** Whether the request is the HTML page's post rather than a custom front end's JSON. */
function fromPage(ctx: GatewayContext): boolean {
  return ctx.request.is(URL_ENCODED) === URL_ENCODED;
}

/**
 * The public routes of forms: no credential. A submission writes one record through the record
 * routes' create path as the form (actor `form`), so it is typed, checked against the plan's
 * record limit, audited and logged like any other; it is not a public API call.
 */
export function publicFormRoutes(deps: PublicFormRoutesDeps): Route[] {
  return [
    defineRoute({
      method: "GET",
      path: "/forms/:form_key",
      operationId: "formPage",
      summary: "A form's HTML page, to link to or embed in an iframe (no credential)",
      description:
        "Rendered from the form's fields, with labels, required marks and descriptions; it " +
        "loads nothing from elsewhere and runs no script. Served with a Content-Security-Policy " +
        "that allows only its own inline style and posts, and `frame-ancestors *`: any site may " +
        "embed it.",
      tags,
      auth: "none",
      params: FormKeyPath,
      htmlPage: true,
      async handle({ ctx, params }) {
        const form = await publicForm(deps, params.form_key, ctx.state.requestId).catch(
          (error: unknown) => {
            if (errorInfoOf(error)?.reason === "form_not_found") return undefined;
            throw error;
          },
        );
        if (form) formPage(ctx, params.form_key, form);
        else notFoundPage(ctx);
        return {};
      },
    }),
    defineRoute({
      method: "GET",
      path: "/forms/:form_key/schema",
      operationId: "formPublicSchema",
      summary: "A form's fields, for a custom front end (no credential)",
      tags,
      auth: "none",
      params: FormKeyPath,
      response: PublicFormSchema,
      errors: ["form_not_found"],
      async handle({ ctx, params }) {
        const form = await publicForm(deps, params.form_key, ctx.state.requestId);
        return {
          form: {
            name: form.name,
            success_message: form.successMessage,
            fields: form.fields.map((field) => ({
              field_id: idOf(field.id),
              name: field.name,
              type: field.type,
              required: field.required,
              description: field.description,
              options: field.options,
            })),
          },
        };
      },
    }),
    defineRoute({
      method: "POST",
      path: "/forms/:form_key/submit",
      operationId: "formSubmit",
      summary: "Submit one record through a form (no credential)",
      description:
        'JSON answers `{"submitted": true}`. The form\'s page posts ' +
        "`application/x-www-form-urlencoded` and gets a 303 to the form's `redirect_url`, or a " +
        "thank-you page. A submission may carry only the form's fields, and must fill its " +
        "required ones; it counts toward the plan's `records`. At most 10 submissions a minute " +
        "per client IP (`form_submit_ip`) and 600 a minute per form (`form_submit_form`). A " +
        "submission that fills the page's hidden bot trap is answered as a success and stored " +
        "nowhere.",
      tags,
      auth: "none",
      rateLimits: ["form_submit_ip", "form_submit_form"],
      params: FormKeyPath,
      body: FormSubmitSchema,
      urlEncodedAs: "data",
      response: FormSubmittedSchema,
      errors: ["form_not_found", "record_limit_exceeded"],
      // The page's post is a person's: a form gone or a limit reached is a page too (refusals
      // of the answers themselves are the handler's, which knows the form's fields).
      refusalPage(ctx, refusal) {
        if (!fromPage(ctx)) return false;
        if (refusal.status === 404) notFoundPage(ctx);
        else if (refusal.status === 429) tooManyPage(ctx, Number(refusal.headers["retry-after"]));
        else return false;
        return true;
      },
      async handle({ ctx, params, body }) {
        const { requestId } = ctx.state;
        const form = await publicForm(deps, params.form_key, requestId);
        const html = fromPage(ctx);
        try {
          await submit(form, body.data, html, requestId);
        } catch (error) {
          // A person on the page reads what to correct on a page, not in JSON.
          const refused = html ? refusalOf(error, ctx, form.fields) : undefined;
          if (!refused) throw error;
          refusedPage(ctx, form, refused.status, refused.problems);
          return new Answered();
        }
        if (!html) return { submitted: true as const };
        if (form.redirectUrl) {
          ctx.set("cache-control", "no-store");
          ctx.redirect(form.redirectUrl);
          ctx.status = 303;
        } else {
          thankYouPage(ctx, form);
        }
        return new Answered();
      },
    }),
  ];

  /** Checks a submission and writes its record as the form; a bot's is dropped. */
  async function submit(
    form: PublicForm,
    data: Record<string, unknown>,
    html: boolean,
    requestId: string,
  ): Promise<void> {
    const submission = checkSubmission(form.fields, data, html);
    if (!submission.bot) {
      await deps.records.createRecord(
        { tableId: form.tableId, dataJson: JSON.stringify(submission.data) },
        {
          ...(await callAs(
            deps.internalSecret,
            {
              kind: "form",
              formId: form.formId,
              organizationId: form.organizationId,
              tableId: form.tableId,
            },
            requestId,
          )),
          timeoutMs: RPC_TIMEOUT_MS,
        },
      );
      // The record is in: a count that fails to be kept is logged, not the submitter's error.
      await deps.catalog
        .countFormSubmission(
          { formId: form.formId },
          await callAs(deps.internalSecret, { kind: "service", service: "gateway" }, requestId),
        )
        .catch((error: unknown) =>
          deps.logger.warn({ err: error, form_id: String(form.formId) }, "form count failed"),
        );
    }
  }
}

/**
 * A refusal of the page's post as the page shows it: its status, and each problem with the
 * field's name. Only the client's refusals (4xx); anything else goes to the error middleware.
 */
function refusalOf(
  error: unknown,
  ctx: GatewayContext,
  fields: readonly FormField[],
): { status: number; problems: string[] } | undefined {
  const { status, body } = httpErrorOf(error, {
    method: ctx.method,
    path: ctx.path,
    requestId: ctx.state.requestId,
  });
  if (status !== 400 && status !== 403) return undefined;
  const items = "extra" in body ? body.extra : [];
  const nameOf = (key: string) => {
    const reference = key.replace(/^data\./, "");
    return fields.find((field) => field.id.toString() === reference)?.name ?? reference;
  };
  return {
    status,
    problems: items.map((item) => `${nameOf(item.key)}: ${item.message}`),
  };
}
