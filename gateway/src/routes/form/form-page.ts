import { randomBytes } from "node:crypto";
import escapeHtml from "escape-html";
import type { GatewayContext } from "../../gateway-context.js";
import { BOT_TRAP_NAME, type FormField } from "./form-submission.js";

/**
 * The public form's HTML: rendered here from the catalog's definitions, every text from the
 * catalog escaped, no script at all, the style inline under a per-answer nonce, nothing loaded
 * from anywhere. Any site may frame it (`frame-ancestors *`): it carries no credential and no
 * session, so a framing page gains nothing.
 */

/** What the pages need to know of a form. */
export interface PageForm {
  name: string;
  successMessage: string;
  redirectUrl: string;
  fields: FormField[];
}

const STYLE = `
:root{color-scheme:light;--ink:#1f2937;--muted:#5b6474;--line:#d5dae1;--accent:#2563eb;--accent-dark:#1d4ed8;--bg:#f4f6f9;--error:#b42318}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;-webkit-text-size-adjust:100%}
main{max-width:40rem;margin:0 auto;padding:2rem 1rem}
.card{background:#fff;border:1px solid var(--line);border-radius:12px;padding:2rem 1.75rem;box-shadow:0 1px 2px rgba(16,24,40,.06),0 4px 16px rgba(16,24,40,.06)}
h1{font-size:1.6rem;line-height:1.25;margin:0 0 .5rem;overflow-wrap:anywhere}
.lead{color:var(--muted);margin:0 0 1.5rem;font-size:.95rem}
.field{margin:0 0 1.35rem;border:0;padding:0;min-width:0}
label,legend{display:block;font-weight:600;margin:0 0 .35rem;padding:0;overflow-wrap:anywhere}
.req{color:var(--error);margin-left:.2rem}
.lead .req{margin:0}
.hint{color:var(--muted);font-size:.9rem;margin:-.15rem 0 .45rem;white-space:pre-line;overflow-wrap:anywhere}
input[type=text],input[type=email],input[type=url],input[type=tel],input[type=number],input[type=date],input[type=datetime-local],select,textarea{display:block;width:100%;font:inherit;color:inherit;background:#fff;border:1px solid var(--line);border-radius:8px;padding:.6rem .75rem;min-height:2.75rem}
textarea{min-height:7rem;resize:vertical}
input:focus,select:focus,textarea:focus,button:focus{outline:3px solid rgba(37,99,235,.35);outline-offset:1px;border-color:var(--accent)}
.choice{display:flex;align-items:center;gap:.6rem;font-weight:400;margin:.3rem 0;min-height:2rem}
.choice input{width:1.15rem;height:1.15rem;margin:0;accent-color:var(--accent)}
button{display:inline-block;font:inherit;font-weight:600;color:#fff;background:var(--accent);border:0;border-radius:8px;padding:.75rem 1.5rem;min-height:2.75rem;cursor:pointer}
button:hover{background:var(--accent-dark)}
.visually-hidden{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}
.trap{position:absolute;left:-10000px;width:1px;height:1px;overflow:hidden}
.done{text-align:center;padding:1rem 0}
.done p{font-size:1.05rem;white-space:pre-line}
.note{color:var(--muted);font-size:.8rem;text-align:center;margin:1.25rem 0 0}
@media (max-width:30rem){main{padding:.75rem .5rem}.card{padding:1.25rem 1rem;border-radius:10px}h1{font-size:1.35rem}button{width:100%}}
`;

/**
 * Sends an HTML page: a fresh nonce for its one style element, and a policy that allows no
 * script, no other resource and form posts only to this origin (and to the form's redirect
 * target, which a browser checks the post's redirect against).
 */
function sendPage(
  ctx: GatewayContext,
  status: number,
  title: string,
  body: string,
  formAction = "'none'",
): void {
  const nonce = randomBytes(16).toString("base64");
  ctx.status = status;
  ctx.type = "text/html; charset=utf-8";
  ctx.set("cache-control", "no-store");
  ctx.set(
    "content-security-policy",
    [
      "default-src 'none'",
      `style-src 'nonce-${nonce}'`,
      "img-src 'none'",
      "base-uri 'none'",
      `form-action ${formAction}`,
      "frame-ancestors *",
    ].join("; "),
  );
  ctx.set("referrer-policy", "no-referrer");
  ctx.body = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

const attr = (value: string | number) => escapeHtml(String(value));

/** The choice names of a select field, in order. */
function choicesOf(field: FormField): string[] {
  const choices = field.options.choices;
  if (!Array.isArray(choices)) return [];
  return choices.flatMap((choice) =>
    choice &&
    typeof choice === "object" &&
    !Array.isArray(choice) &&
    typeof choice.name === "string"
      ? [choice.name]
      : [],
  );
}

/** `step`, `min` and `max` of a number input from the field's options. */
function numberAttributes(field: FormField): string {
  const { decimals, min, max } = field.options;
  const places = typeof decimals === "number" ? decimals : undefined;
  const step = places === undefined ? "any" : places === 0 ? "1" : `0.${"0".repeat(places - 1)}1`;
  return [
    ` step="${step}"`,
    typeof min === "number" ? ` min="${attr(min)}"` : "",
    typeof max === "number" ? ` max="${attr(max)}"` : "",
  ].join("");
}

const INPUT_TYPES: Partial<Record<FormField["type"], string>> = {
  text: "text",
  email: "email",
  url: "url",
  phone: "tel",
  number: "number",
  date: "date",
  datetime: "datetime-local",
};

const AUTOCOMPLETE: Partial<Record<FormField["type"], string>> = {
  email: "email",
  phone: "tel",
  url: "url",
};

/** One field: a label tied to its control, its description, a visible and an announced `required`. */
function renderField(field: FormField): string {
  const id = `f${field.id}`;
  const name = attr(field.id.toString());
  const hintId = `${id}-hint`;
  const hint = field.description
    ? `<p class="hint" id="${hintId}">${escapeHtml(field.description)}</p>`
    : "";
  const described = field.description ? ` aria-describedby="${hintId}"` : "";
  const mark = field.required ? `<span class="req" aria-hidden="true">*</span>` : "";
  const required = field.required ? " required" : "";
  const label = `${escapeHtml(field.name)}${mark}`;

  if (field.type === "multi_select" || field.type === "boolean") {
    const boxes =
      field.type === "boolean"
        ? [
            `<label class="choice"><input type="checkbox" id="${id}" name="${name}" value="on"${required}${described}> ${label}</label>`,
          ]
        : choicesOf(field).map(
            (choice, index) =>
              `<label class="choice"><input type="checkbox" name="${name}" value="${attr(choice)}" id="${id}-${index}"> ${escapeHtml(choice)}</label>`,
          );
    if (field.type === "boolean") return `<div class="field">${boxes.join("")}${hint}</div>`;
    return `<fieldset class="field"${described}><legend>${label}${
      field.required ? '<span class="visually-hidden"> (required)</span>' : ""
    }</legend>${hint}${boxes.join("")}</fieldset>`;
  }

  let control: string;
  if (field.type === "single_select") {
    const options = choicesOf(field)
      .map((choice) => `<option value="${attr(choice)}">${escapeHtml(choice)}</option>`)
      .join("");
    control = `<select id="${id}" name="${name}"${required}${described}><option value="">Choose…</option>${options}</select>`;
  } else if (field.type === "long_text" || field.type === "json") {
    control = `<textarea id="${id}" name="${name}" rows="5"${required}${described}></textarea>`;
  } else {
    const type = INPUT_TYPES[field.type] ?? "text";
    const maxLength =
      field.type === "text" && typeof field.options.max_length === "number"
        ? ` maxlength="${attr(field.options.max_length)}"`
        : "";
    const auto = AUTOCOMPLETE[field.type] ? ` autocomplete="${AUTOCOMPLETE[field.type]}"` : "";
    const numbers = field.type === "number" ? numberAttributes(field) : "";
    control = `<input type="${type}" id="${id}" name="${name}"${maxLength}${numbers}${auto}${required}${described}>`;
  }
  const zone = field.type === "datetime" ? ' <span class="hint">(UTC)</span>' : "";
  return `<div class="field"><label for="${id}">${label}${zone}</label>${hint}${control}</div>`;
}

/** The origin a browser must allow the form's post to be redirected to, quoted for the policy. */
function redirectOrigin(redirectUrl: string): string {
  return redirectUrl && URL.canParse(redirectUrl) ? ` ${new URL(redirectUrl).origin}` : "";
}

/** The form's page: a form that posts to `<form_key>/submit` beside it. */
export function formPage(ctx: GatewayContext, formKey: string, form: PageForm): void {
  const anyRequired = form.fields.some((field) => field.required);
  const body = `<div class="card">
<h1>${escapeHtml(form.name)}</h1>
${anyRequired ? '<p class="lead">Fields marked <span class="req" aria-hidden="true">*</span><span class="visually-hidden">with an asterisk</span> are required.</p>' : ""}
<form method="post" action="${attr(formKey)}/submit" accept-charset="utf-8">
${form.fields.map(renderField).join("\n")}
<div class="trap" aria-hidden="true"><label for="${BOT_TRAP_NAME}">Leave this field empty</label><input type="text" id="${BOT_TRAP_NAME}" name="${BOT_TRAP_NAME}" tabindex="-1" autocomplete="off"></div>
<button type="submit">Submit</button>
</form>
</div>
<p class="note">Powered by Rowbase</p>`;
  sendPage(ctx, 200, form.name, body, `'self'${redirectOrigin(form.redirectUrl)}`);
}

/** The page after a submission from the form's page, without a `redirect_url`. */
export function thankYouPage(ctx: GatewayContext, form: PageForm): void {
  const message = form.successMessage || "Thank you. Your answers have been sent.";
  const body = `<div class="card done" role="status">
<h1>${escapeHtml(form.name)}</h1>
<p>${escapeHtml(message)}</p>
</div>`;
  sendPage(ctx, 200, form.name, body);
}

/**
 * The answer to the page's post when it is refused (a value that does not fit, the plan's
 * record limit): what to correct, by field name, and the way back, which keeps the answers.
 */
export function refusedPage(
  ctx: GatewayContext,
  form: PageForm,
  status: number,
  problems: string[],
): void {
  const list = problems.length
    ? `<ul>${problems.map((problem) => `<li>${escapeHtml(problem)}</li>`).join("")}</ul>`
    : "";
  const body = `<div class="card" role="alert">
<h1>${escapeHtml(form.name)}</h1>
<p>${status === 400 ? "Some answers need a correction:" : "This form cannot take answers right now. Please try again later."}</p>
${list}
<p class="hint">Use your browser's back button to return to the form with your answers.</p>
</div>`;
  sendPage(ctx, status, form.name, body);
}

/** The page's answer to a key of no active form. */
export function notFoundPage(ctx: GatewayContext): void {
  messagePage(ctx, 404, "Form not found", "This form does not exist or no longer takes answers.");
}

/** The page's answer to a post past the submission limits (the caller sets `Retry-After`). */
export function tooManyPage(ctx: GatewayContext, retryAfterSeconds: number): void {
  const wait = retryAfterSeconds > 1 ? `in ${retryAfterSeconds} seconds` : "in a moment";
  messagePage(
    ctx,
    429,
    "Too many submissions",
    `This form has taken many answers just now. Please use your browser's back button and send yours again ${wait}.`,
  );
}

function messagePage(ctx: GatewayContext, status: number, title: string, text: string): void {
  const body = `<div class="card done" role="alert">
<h1>${escapeHtml(title)}</h1>
<p>${escapeHtml(text)}</p>
</div>`;
  sendPage(ctx, status, title, body);
}
