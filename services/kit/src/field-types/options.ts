import { randomBytes } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { FieldType } from "@rowbase/proto/rowbase/catalog/v1/catalog_pb";
import { z } from "zod";
import { isPlainObject } from "../plain-object.js";
import { nameProblem } from "./names.js";
import { type FieldTypeName, fieldTypeFromProto } from "./types.js";

/** One option that does not fit its type, keyed like `options.decimals` in `data.errors`. */
export interface OptionError {
  key: string;
  message: string;
}

export type OptionsResult =
  | { ok: true; options: JsonObject }
  | { ok: false; errors: OptionError[] };

/**
 * A field as the registry needs it: its type and its stored options, as catalog returns them
 * (`Field.options`). Options are read defensively; missing ones mean the type's defaults.
 */
export interface FieldLike {
  type: FieldTypeName;
  options?: Readonly<JsonObject> | undefined;
}

/**
 * A field message (catalog's `Field`, as GetTableSchema returns it) as the registry reads it;
 * undefined for FIELD_TYPE_UNSPECIFIED or a type this build does not know.
 */
export function fieldLikeOf(field: {
  type: FieldType;
  options?: JsonObject | undefined;
}): FieldLike | undefined {
  const type = fieldTypeFromProto(field.type);
  return type ? { type, options: field.options ?? {} } : undefined;
}

/** A choice of a select field. `id` is given by the server and survives renames. */
export interface Choice {
  id: string;
  name: string;
  color?: string;
}

/** A choice whose `id` stayed while its name changed. */
export interface ChoiceRename {
  choiceId: string;
  oldName: string;
  newName: string;
}

export const TEXT_MAX_LENGTH = 10_000;
export const LONG_TEXT_MAX_LENGTH = 100_000;
export const MAX_DECIMALS = 10;
/**
 * Choices per select field. At the limit a field's options are about 470 KB of JSON (names of
 * 100 four-byte characters, 32-letter colours), so an event carrying old and new options fits
 * NATS's 1 MiB; catalog bounds a whole table's schema besides (MAX_SCHEMA_BYTES).
 */
export const MAX_CHOICES = 1_000;
export const MAX_ALLOWED_TYPES = 100;

const integerIn = (min: number, max: number, message: string) =>
  z.int({ error: message }).min(min, { error: message }).max(max, { error: message });

const finiteNumber = z.number({ error: "must be a finite number" });

const choiceName = z
  .string({ error: "must be a string" })
  .trim()
  .superRefine((name, ctx) => {
    const problem = nameProblem(name);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });

/** `#rgb`, `#rrggbb`, or a palette name such as `blue` or `green-light`. */
const color = z
  .string({ error: "must be a string" })
  .regex(/^(#[0-9a-fA-F]{3}|#[0-9a-fA-F]{6}|[a-zA-Z][a-zA-Z0-9_-]{0,31})$/, {
    error: "must be a #rrggbb colour or a colour name of at most 32 letters, digits, - and _",
  });

const choice = z.strictObject(
  {
    id: z.string({ error: "must be a string" }).optional(),
    name: choiceName,
    color: color.optional(),
  },
  { error: "must be an object" },
);

/** A MIME type (`image/png`) or a whole top-level type (`image/*`), RFC 6838 names. */
const mimePattern = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/([a-z0-9][a-z0-9!#$&^_.+-]{0,126}|\*)$/i;

const mimeType = z
  .string({ error: "must be a string" })
  .regex(mimePattern, { error: "must be a MIME type such as image/png, or a type/* pattern" })
  .transform((type) => type.toLowerCase());

const noOptions = z.strictObject({});

/** An id of a table, field or record: a positive integer below 2^53. */
const entityId = integerIn(1, Number.MAX_SAFE_INTEGER, "must be a positive integer id");

/** What a rollup computes over the linked records' values. */
export const ROLLUP_FUNCTIONS = ["count", "count_values", "sum", "avg", "min", "max"] as const;
export type RollupFunction = (typeof ROLLUP_FUNCTIONS)[number];

/** The most records one link value holds (and a record shows per link field). */
export const MAX_LINKS_PER_VALUE = 1_000;

/** `n` times 10^`places` through the decimal exponent, without binary error (0.1 × 10 is 1). */
function shifted(n: number, places: number): number {
  const [mantissa, exponent] = n.toExponential().split("e") as [string, string];
  return Number(`${mantissa}e${Number(exponent) + places}`);
}

/** The option schemas, one per field type; every one refuses unknown keys. */
export const OPTION_SCHEMAS = {
  text: z.strictObject({
    max_length: integerIn(
      1,
      TEXT_MAX_LENGTH,
      `must be an integer from 1 to ${TEXT_MAX_LENGTH}`,
    ).optional(),
  }),
  long_text: noOptions,
  number: z
    .strictObject({
      decimals: integerIn(0, MAX_DECIMALS, `must be an integer from 0 to ${MAX_DECIMALS}`).default(
        0,
      ),
      min: finiteNumber.optional(),
      max: finiteNumber.optional(),
    })
    .refine((o) => o.min === undefined || o.max === undefined || o.min <= o.max, {
      error: "must not be greater than max",
      path: ["min"],
    })
    .refine(
      (o) =>
        o.min === undefined ||
        o.max === undefined ||
        o.min > o.max ||
        Math.ceil(shifted(o.min, o.decimals)) <= Math.floor(shifted(o.max, o.decimals)),
      { error: "leaves no number of the field's decimals up to max", path: ["min"] },
    ),
  boolean: noOptions,
  date: noOptions,
  datetime: noOptions,
  single_select: z.strictObject({
    choices: z
      .array(choice, { error: "must be an array of choices" })
      .max(MAX_CHOICES, { error: `must have at most ${MAX_CHOICES} choices` })
      .default([]),
  }),
  multi_select: z.strictObject({
    choices: z
      .array(choice, { error: "must be an array of choices" })
      .max(MAX_CHOICES, { error: `must have at most ${MAX_CHOICES} choices` })
      .default([]),
  }),
  email: noOptions,
  url: noOptions,
  phone: noOptions,
  json: noOptions,
  file: z.strictObject({
    max_size: integerIn(
      1,
      Number.MAX_SAFE_INTEGER,
      "must be a positive integer number of bytes",
    ).optional(),
    allowed_types: z
      .array(mimeType, { error: "must be an array of MIME types" })
      .min(1, { error: "must list at least one type (leave it out to allow any)" })
      .max(MAX_ALLOWED_TYPES, { error: `must list at most ${MAX_ALLOWED_TYPES} types` })
      .optional(),
  }),
  autonumber: noOptions,
  created_at: noOptions,
  updated_at: noOptions,
  /**
   * `inverse_field_id` is the link field catalog creates in the linked table; catalog sets it,
   * and refuses it from a client.
   */
  link: z.strictObject({
    table_id: entityId,
    multiple: z.boolean({ error: "must be true or false" }).default(true),
    inverse_field_id: entityId.optional(),
  }),
  lookup: z.strictObject({ link_field_id: entityId, field_id: entityId }),
  rollup: z.strictObject({
    link_field_id: entityId,
    field_id: entityId,
    function: z.enum(ROLLUP_FUNCTIONS, { error: `must be one of ${ROLLUP_FUNCTIONS.join(", ")}` }),
  }),
} satisfies Record<FieldTypeName, z.ZodType>;

/** A link field's options as stored (defaults filled in; `inverse_field_id` once created). */
export interface LinkOptions {
  tableId: bigint;
  multiple: boolean;
  inverseFieldId: bigint | undefined;
}

/** Reads a link field's stored options; undefined when they are not a link's. */
export function linkOptionsOf(options: Readonly<JsonObject> | undefined): LinkOptions | undefined {
  const tableId = options?.table_id;
  if (typeof tableId !== "number" || !Number.isSafeInteger(tableId)) return undefined;
  const inverse = options?.inverse_field_id;
  return {
    tableId: BigInt(tableId),
    multiple: options?.multiple !== false,
    inverseFieldId:
      typeof inverse === "number" && Number.isSafeInteger(inverse) ? BigInt(inverse) : undefined,
  };
}

/** A lookup's or rollup's stored options; `function` only for a rollup. */
export interface ComputedOptions {
  linkFieldId: bigint;
  fieldId: bigint;
  function: RollupFunction | undefined;
}

/** Reads a lookup's or rollup's stored options; undefined when they are neither's. */
export function computedOptionsOf(
  options: Readonly<JsonObject> | undefined,
): ComputedOptions | undefined {
  const link = options?.link_field_id;
  const field = options?.field_id;
  if (typeof link !== "number" || !Number.isSafeInteger(link)) return undefined;
  if (typeof field !== "number" || !Number.isSafeInteger(field)) return undefined;
  const fn = options?.function;
  return {
    linkFieldId: BigInt(link),
    fieldId: BigInt(field),
    function: (ROLLUP_FUNCTIONS as readonly unknown[]).includes(fn)
      ? (fn as RollupFunction)
      : undefined,
  };
}

export function isSelectType(type: FieldTypeName): type is "single_select" | "multi_select" {
  return type === "single_select" || type === "multi_select";
}

/** A fresh choice id: `ch_` and 12 URL-safe characters (72 random bits). */
export function newChoiceId(): string {
  return `ch_${randomBytes(9).toString("base64url")}`;
}

export interface ParseOptionsContext {
  /**
   * The field as it is now, when options are being replaced: a choice that names an `id` must be
   * one of its choices (that is how a rename is told from a new choice).
   */
  previous?: FieldLike;
  /** Makes ids for new choices; defaults to `newChoiceId`. */
  newChoiceId?: () => string;
}

function keyOf(path: readonly PropertyKey[], extra?: string): string {
  return ["options", ...path.map(String), ...(extra === undefined ? [] : [extra])].join(".");
}

/**
 * Checks and normalises the options of a field of `type`: unknown keys and values that do not
 * fit are listed with keys like `options.decimals` or `options.choices.2.name`. `undefined`
 * means the type's defaults. The result is what catalog stores: defaults filled in
 * (`decimals: 0`, `choices: []`), choice names trimmed, every choice with an `id`, MIME types in
 * lower case without repeats.
 */
export function parseFieldOptions(
  type: FieldTypeName,
  input: unknown,
  context: ParseOptionsContext = {},
): OptionsResult {
  const raw = input === undefined || input === null ? {} : input;
  if (!isPlainObject(raw)) {
    return { ok: false, errors: [{ key: "options", message: "must be an object" }] };
  }
  const parsed = OPTION_SCHEMAS[type].safeParse(raw);
  if (!parsed.success) {
    const errors: OptionError[] = [];
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys") {
        for (const key of issue.keys) {
          errors.push({ key: keyOf(issue.path, key), message: "is not allowed" });
        }
      } else {
        const key = keyOf(issue.path);
        // One check can fail twice (z.int's own safe-integer bound and an explicit max).
        if (!errors.some((e) => e.key === key && e.message === issue.message)) {
          errors.push({ key, message: issue.message });
        }
      }
    }
    return { ok: false, errors };
  }
  const options = parsed.data as Record<string, unknown>;
  if (isSelectType(type)) {
    return normaliseChoices(options.choices as ParsedChoice[], context);
  }
  if (type === "file" && Array.isArray(options.allowed_types)) {
    return {
      ok: true,
      options: { ...options, allowed_types: [...new Set(options.allowed_types)] },
    };
  }
  return { ok: true, options: options as JsonObject };
}

interface ParsedChoice {
  id?: string | undefined;
  name: string;
  color?: string | undefined;
}

/**
 * Checks choice names and ids and gives every choice its id: the one it names (which must be a
 * current choice), else the id of the current choice with the same name regardless of case
 * when no other entry claims it (a client that resends names keeps the ids), else a fresh one.
 */
function normaliseChoices(choices: ParsedChoice[], context: ParseOptionsContext): OptionsResult {
  const current =
    context.previous && isSelectType(context.previous.type)
      ? choicesOf(context.previous.options)
      : [];
  const known = new Set(current.map((c) => c.id));
  const claimed = new Set(choices.flatMap((c) => (c.id === undefined ? [] : [c.id])));
  const byName = new Map<string, string>();
  for (const c of current) {
    const lower = c.name.toLowerCase();
    if (!claimed.has(c.id) && !byName.has(lower)) byName.set(lower, c.id);
  }
  const makeId = context.newChoiceId ?? newChoiceId;
  const errors: OptionError[] = [];
  const seenNames = new Map<string, number>();
  const seenIds = new Set<string>();
  const result: JsonObject[] = [];
  choices.forEach((c, index) => {
    const lower = c.name.toLowerCase();
    const first = seenNames.get(lower);
    if (first !== undefined) {
      errors.push({
        key: keyOf(["choices", index, "name"]),
        message: `duplicates choice ${first} (names are unique regardless of case)`,
      });
    } else {
      seenNames.set(lower, index);
    }
    if (c.id !== undefined) {
      if (!known.has(c.id)) {
        errors.push({
          key: keyOf(["choices", index, "id"]),
          message: "is not a choice of this field (leave the id out for a new choice)",
        });
      } else if (seenIds.has(c.id)) {
        errors.push({ key: keyOf(["choices", index, "id"]), message: "appears more than once" });
      }
      seenIds.add(c.id);
    }
    const id = c.id ?? (first === undefined ? byName.get(lower) : undefined) ?? makeId();
    const out: JsonObject = { id, name: c.name };
    if (c.color !== undefined) out.color = c.color;
    result.push(out);
  });
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, options: { choices: result } };
}

/**
 * The options a field keeps when its type changes and the request names no new ones: a select
 * keeps its choices (ids included) as the other kind of select; anything else starts from the
 * new type's defaults.
 */
export function optionsAfterTypeChange(from: FieldLike, to: FieldTypeName): JsonObject {
  if (isSelectType(from.type) && isSelectType(to)) {
    return { choices: choicesOf(from.options).map((c) => ({ ...c })) };
  }
  const defaults = parseFieldOptions(to, undefined);
  if (!defaults.ok) throw new Error(`defaults of ${to} do not parse`);
  return defaults.options;
}

function readNumber(options: Readonly<JsonObject> | undefined, key: string): number | undefined {
  const value = options?.[key];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * The choices read from each stored `choices` array. Stored options are never changed in place
 * (an update builds new ones), and every value written to a select field is checked against
 * them: a batch of 1000 records read the same choices 1000 times per select field.
 */
const choicesRead = new WeakMap<object, readonly Choice[]>();

/** The choices of stored select options (an empty list when there are none). */
export function choicesOf(options: Readonly<JsonObject> | undefined): readonly Choice[] {
  const raw = options?.choices;
  if (!Array.isArray(raw)) return [];
  const known = choicesRead.get(raw);
  if (known) return known;
  const choices: Choice[] = [];
  for (const item of raw as JsonValue[]) {
    if (!isPlainObject(item)) continue;
    const { id, name, color: colour } = item as JsonObject;
    if (typeof id !== "string" || typeof name !== "string") continue;
    choices.push(typeof colour === "string" ? { id, name, color: colour } : { id, name });
  }
  Object.freeze(choices);
  choicesRead.set(raw, choices);
  return choices;
}

/**
 * The choices renamed between two versions of a select field's options: same id, other name.
 * All renames of one update belong together (swapping two names is two renames).
 */
export function choiceRenames(
  before: Readonly<JsonObject> | undefined,
  after: Readonly<JsonObject> | undefined,
): ChoiceRename[] {
  const old = new Map(choicesOf(before).map((c) => [c.id, c.name]));
  const renames: ChoiceRename[] = [];
  for (const c of choicesOf(after)) {
    const oldName = old.get(c.id);
    if (oldName !== undefined && oldName !== c.name) {
      renames.push({ choiceId: c.id, oldName, newName: c.name });
    }
  }
  return renames;
}

/** The longest text a field takes, in characters (Unicode code points). */
export function textLimitOf(field: FieldLike): number {
  if (field.type === "long_text") return LONG_TEXT_MAX_LENGTH;
  const maxLength = readNumber(field.options, "max_length");
  return maxLength !== undefined && maxLength >= 1
    ? Math.min(Math.floor(maxLength), TEXT_MAX_LENGTH)
    : TEXT_MAX_LENGTH;
}

export interface NumberSettings {
  decimals: number;
  min?: number;
  max?: number;
}

/** A number field's decimals and bounds. */
export function numberSettingsOf(field: FieldLike): NumberSettings {
  const decimals = readNumber(field.options, "decimals");
  const settings: NumberSettings = {
    decimals:
      decimals !== undefined && Number.isInteger(decimals)
        ? Math.min(Math.max(decimals, 0), MAX_DECIMALS)
        : 0,
  };
  const min = readNumber(field.options, "min");
  const max = readNumber(field.options, "max");
  if (min !== undefined) settings.min = min;
  if (max !== undefined) settings.max = max;
  return settings;
}

export interface FileSettings {
  maxSize?: number;
  allowedTypes?: string[];
}

/** A file field's size limit and accepted MIME types (undefined: any). */
export function fileSettingsOf(field: FieldLike): FileSettings {
  const settings: FileSettings = {};
  const maxSize = readNumber(field.options, "max_size");
  if (maxSize !== undefined) settings.maxSize = maxSize;
  const types = field.options?.allowed_types;
  if (Array.isArray(types)) {
    settings.allowedTypes = types.filter((t): t is string => typeof t === "string");
  }
  return settings;
}

/**
 * Whether a file field takes a file of this MIME type and size; the problem if not. The files
 * service applies the plan's `max_file_bytes` besides this.
 */
export function fieldAcceptsFile(
  field: FieldLike,
  file: { mimeType: string; size: number },
): { ok: true } | { ok: false; reason: "file_too_large" | "file_type_not_allowed" } {
  const { maxSize, allowedTypes } = fileSettingsOf(field);
  if (maxSize !== undefined && file.size > maxSize) return { ok: false, reason: "file_too_large" };
  if (allowedTypes) {
    const mime = file.mimeType.split(";")[0]!.trim().toLowerCase();
    const top = mime.split("/")[0];
    const allowed = allowedTypes.some((t) => t === mime || (t.endsWith("/*") && t === `${top}/*`));
    if (!allowed) return { ok: false, reason: "file_type_not_allowed" };
  }
  return { ok: true };
}
