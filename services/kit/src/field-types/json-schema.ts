import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  choicesOf,
  type FieldLike,
  linkOptionsOf,
  MAX_LINKS_PER_VALUE,
  numberSettingsOf,
  textLimitOf,
} from "./options.js";
import { isReadOnlyType } from "./types.js";
import {
  EMAIL_MAX_LENGTH,
  EXACT_SIGNIFICANT_DIGITS,
  JSON_MAX_BYTES,
  PHONE_MAX_LENGTH,
  URL_MAX_LENGTH,
} from "./values.js";

/**
 * Whether a schema describes a value as records return it (`output`) or as a write may send it
 * (`input`: numbers also as numeric strings, select names regardless of case).
 */
export type SchemaDirection = "output" | "input";

/** The characters a phone number may hold between its digits, as a pattern's class. */
const PHONE_SEPARATORS = "[\\s()./-]";

/** No NUL character, which PostgreSQL cannot store in text. */
const NO_NUL = "^[^\\u0000]*$";

/** The metadata a file field holds: the FileInfo the file routes answer. */
const FILE_INFO: JsonObject = {
  type: "object",
  properties: {
    row_id: { type: "integer" },
    field_id: { type: "integer" },
    file_name: { type: "string" },
    content_type: { type: "string" },
    size: { type: "integer" },
    sha256: { type: "string" },
    created_at: { type: "string", format: "date-time" },
    updated_at: { type: "string", format: "date-time" },
    deleted_at: { type: ["string", "null"], format: "date-time" },
  },
};

/**
 * A schema that also admits null (an empty cell). An enum gets null among its values and its
 * `type` widened as well: both keywords apply, so null in the enum alone still fails the type.
 */
function nullable(schema: JsonObject): JsonObject {
  const typed =
    typeof schema.type === "string" ? { ...schema, type: [schema.type, "null"] } : schema;
  if (Array.isArray(schema.enum)) return { ...typed, enum: [...schema.enum, null] };
  if (typed !== schema) return typed;
  if (Array.isArray(schema.anyOf)) return { ...schema, anyOf: [...schema.anyOf, { type: "null" }] };
  return schema;
}

function numberSchema(field: FieldLike, direction: SchemaDirection): JsonObject {
  const { decimals, min, max } = numberSettingsOf(field);
  // No number past 2^53 - 1 is kept exactly (`inexactNumberProblem`), whatever the options say.
  const bounds: JsonObject = {
    minimum: Math.max(min ?? -Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER),
    maximum: Math.min(max ?? Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
  };
  const description =
    `Rounded half away from zero to ${decimals} decimal place${decimals === 1 ? "" : "s"}; ` +
    `then at most ${EXACT_SIGNIFICANT_DIGITS} significant digits, or a whole number of at most ` +
    `${Number.MAX_SAFE_INTEGER} either way, the numbers kept exactly (others answer 400).`;
  if (direction === "output") return { type: "number", ...bounds, description };
  return {
    anyOf: [
      { type: "number", ...bounds },
      { type: "string", pattern: "^\\s*[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+)?\\s*$" },
    ],
    description: `${description} A numeric string is accepted and converted.`,
  };
}

/**
 * The JSON Schema (2020-12, as OpenAPI 3.1 uses it) of a field's value: the type and the limits
 * its options set, `readOnly` for the values the system writes, null for an empty cell. The one
 * description of values besides `validateValue`, for documents such as a table's OpenAPI.
 */
export function jsonSchemaOf(field: FieldLike, direction: SchemaDirection = "output"): JsonObject {
  const readOnly = isReadOnlyType(field.type);
  let schema: JsonObject;
  switch (field.type) {
    case "text":
      schema = { type: "string", maxLength: textLimitOf(field), pattern: NO_NUL };
      break;
    case "long_text":
      // The limit is the stored Markdown's: the same text rendered as HTML can be longer.
      schema =
        direction === "input"
          ? {
              type: "string",
              maxLength: textLimitOf(field),
              pattern: NO_NUL,
              description: "Rich text, stored as Markdown.",
            }
          : {
              type: "string",
              pattern: NO_NUL,
              description: `Rich text, stored as Markdown of at most ${textLimitOf(field)} characters; \`rich_text\` chooses how it is returned.`,
            };
      break;
    case "number":
      schema = numberSchema(field, direction);
      break;
    case "boolean":
      schema = { type: "boolean" };
      break;
    case "date":
      schema = {
        type: "string",
        format: "date",
        pattern: "^(?!0000)",
        description: "YYYY-MM-DD, in the years 1-9999",
      };
      break;
    case "datetime":
      schema = {
        type: "string",
        format: "date-time",
        description: "RFC 3339; returned in UTC with milliseconds.",
      };
      break;
    // A write names the choices as an enum too, so that a typed client cannot misspell one;
    // the server also takes them in any case with blanks around, which only the description says.
    case "single_select": {
      const names = choicesOf(field.options).map((c) => c.name);
      schema =
        direction === "output"
          ? { type: "string", enum: names }
          : {
              type: "string",
              enum: names,
              description: `One of: ${names.join(", ")} (any case is accepted).`,
            };
      break;
    }
    case "multi_select": {
      const names = choicesOf(field.options).map((c) => c.name);
      schema = {
        type: "array",
        items: { type: "string", enum: names },
        uniqueItems: direction === "output",
        description: `Choice names from: ${names.join(", ")}${direction === "input" ? " (any case is accepted)" : ""}.`,
      };
      break;
    }
    case "email":
      schema = {
        type: "string",
        format: "email",
        // The top-level label begins with a letter (`xn--` included): `ada@example.123` is none.
        pattern: "\\.[^\\s\\d.@_-][^\\s.@]*\\s*$",
        maxLength: EMAIL_MAX_LENGTH,
      };
      break;
    case "url":
      schema = {
        type: "string",
        format: "uri",
        pattern: "^\\s*[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]",
        maxLength: URL_MAX_LENGTH,
      };
      break;
    case "phone":
      schema = {
        type: "string",
        // What `validateValue` takes: 3-20 digits among spaces and ( ) . - /, a leading +, and
        // an optional extension (x, ext or # and up to 6 digits).
        pattern: `^\\s*\\+?${PHONE_SEPARATORS}*(?:\\d${PHONE_SEPARATORS}*){3,20}(?:\\s*(?:[Xx]|[Ee][Xx][Tt]\\.?|#)\\s*\\d{1,6})?\\s*$`,
        maxLength: PHONE_MAX_LENGTH,
      };
      break;
    case "json":
      return {
        description: `Any JSON value of at most ${JSON_MAX_BYTES} bytes.`,
        examples: [exampleValueOf(field)],
      };
    case "file":
      schema = { ...FILE_INFO, description: "Written through the /file routes." };
      break;
    case "autonumber":
      schema = { type: "integer", description: "Assigned when the record is created." };
      break;
    case "created_at":
      schema = { type: "string", format: "date-time", description: "When the record was created." };
      break;
    case "updated_at":
      schema = {
        type: "string",
        format: "date-time",
        description: "When the record was last changed.",
      };
      break;
    case "link":
      return linkSchema(field, direction);
    case "lookup":
      return {
        type: "array",
        description: "The looked-up field's values across the linked records, read-only.",
        readOnly: true,
        examples: [exampleValueOf(field)],
      };
    case "rollup":
      return {
        type: ["number", "string", "null"],
        description:
          "The rollup's function over the linked records: a number, or a date or datetime for min and max of dates; read-only.",
        readOnly: true,
        examples: [exampleValueOf(field)],
      };
  }
  const result = { ...nullable(schema), examples: [exampleValueOf(field)] };
  return readOnly ? { ...result, readOnly: true } : result;
}

/**
 * A link as records return it (the linked records, ascending by row id, each with its primary
 * field's value) or as a write sends it (their row ids, or `{"row_id"}` objects; null or []
 * clears it).
 */
function linkSchema(field: FieldLike, direction: SchemaDirection): JsonObject {
  const maxItems = linkOptionsOf(field.options)?.multiple === false ? 1 : MAX_LINKS_PER_VALUE;
  if (direction === "output") {
    return {
      type: "array",
      items: {
        type: "object",
        properties: { row_id: { type: "integer" }, display: { type: "string" } },
        required: ["row_id", "display"],
      },
      maxItems: MAX_LINKS_PER_VALUE,
      description: `The linked records in row id order, at most ${MAX_LINKS_PER_VALUE} (the record's \`links_truncated\` names a field that has more).`,
      examples: [[{ row_id: 1, display: "Example" }]],
    };
  }
  return {
    type: ["array", "null"],
    items: {
      anyOf: [
        { type: "integer", minimum: 1 },
        {
          type: "object",
          properties: { row_id: { type: "integer", minimum: 1 } },
          required: ["row_id"],
          additionalProperties: false,
        },
      ],
    },
    maxItems,
    description: "Row ids of the linked table's records; null or [] clears the link.",
    examples: [exampleValueOf(field)],
  };
}

const EXAMPLE_TIME = "2026-01-15T09:30:00.000Z";

/**
 * A value the field holds and a write may send (read-only fields: one as records return it),
 * for documents and generated clients: within the field's limits, its first choice.
 */
export function exampleValueOf(field: FieldLike): JsonValue {
  switch (field.type) {
    case "text":
      return "Example".slice(0, textLimitOf(field));
    case "long_text":
      return "Some **bold** text";
    case "number": {
      const { decimals, min, max } = numberSettingsOf(field);
      const scale = 10 ** decimals;
      if (min !== undefined && min > 42) return Math.ceil(min * scale) / scale;
      if (max !== undefined && max < 42) return Math.floor(max * scale) / scale;
      return 42;
    }
    case "boolean":
      return true;
    case "date":
      return EXAMPLE_TIME.slice(0, 10);
    case "datetime":
    case "created_at":
    case "updated_at":
      return EXAMPLE_TIME;
    case "single_select":
      return choicesOf(field.options)[0]?.name ?? null;
    case "multi_select":
      return choicesOf(field.options)
        .slice(0, 1)
        .map((c) => c.name);
    case "email":
      return "ada@example.com";
    case "url":
      return "https://example.com/";
    case "phone":
      return "+1 555 0100";
    case "json":
      return { key: "value" };
    case "file":
      return {
        row_id: 1,
        field_id: 1,
        file_name: "report.pdf",
        content_type: "application/pdf",
        size: 1024,
        sha256: "0".repeat(64),
        created_at: EXAMPLE_TIME,
        updated_at: EXAMPLE_TIME,
        deleted_at: null,
      };
    case "autonumber":
      return 1;
    case "link":
      return [1];
    case "lookup":
      return ["Example"];
    case "rollup":
      return 42;
  }
}
