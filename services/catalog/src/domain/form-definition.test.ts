import { describe, expect, it } from "vitest";
import { checkFormInput, type FormFieldCandidate, newFormKey } from "./form-definition.js";

const FIELDS: FormFieldCandidate[] = [
  { id: 10n, name: "Name", type: "text", required: false },
  { id: 11n, name: "Email", type: "email", required: false },
  { id: 12n, name: "Serial", type: "autonumber", required: false },
  { id: 13n, name: "Photo", type: "file", required: false },
];

function reasonOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return (error as Error).message;
  }
  return "accepted";
}

describe("form definitions", () => {
  it("have keys of 128 random bits in 22 URL-safe characters", () => {
    const keys = new Set(Array.from({ length: 100 }, () => newFormKey()));
    expect(keys.size).toBe(100);
    for (const key of keys) expect(key).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it("resolve fields by id or name, in order, and check required against them", () => {
    expect(
      checkFormInput({ name: " Contact ", fields: ["email", "10"], required: ["EMAIL"] }, FIELDS),
    ).toEqual({ name: "Contact", fields: [11, 10], required: [11] });
  });

  it("refuse read-only and file fields, unknown or repeated ones, and required ones not shown", () => {
    expect(reasonOf(() => checkFormInput({ fields: ["Name", "Serial"] }, FIELDS))).toContain(
      "form_field_not_allowed",
    );
    expect(reasonOf(() => checkFormInput({ fields: ["Photo"] }, FIELDS))).toContain(
      "form_field_not_allowed",
    );
    expect(reasonOf(() => checkFormInput({ fields: ["Nope", "Name", "name"] }, FIELDS))).toContain(
      "validation_failed",
    );
    expect(
      reasonOf(() => checkFormInput({ fields: ["Name"], required: ["Email"] }, FIELDS)),
    ).toContain("validation_failed");
    // An update's required is checked against the fields the form shows already.
    expect(checkFormInput({ required: ["Email"] }, FIELDS, [11])).toEqual({ required: [11] });
    expect(
      reasonOf(() => checkFormInput({ redirectUrl: "http://example.com/" }, FIELDS)),
    ).toContain("validation_failed");
  });

  it("refuse a form without a field its table requires, whether created or changed", () => {
    const fields = FIELDS.map((field) => ({ ...field, required: field.id === 11n }));
    expect(reasonOf(() => checkFormInput({ name: "Lead", fields: ["Name"] }, fields))).toContain(
      "validation_failed",
    );
    expect(reasonOf(() => checkFormInput({ fields: ["Name"] }, fields, [10, 11]))).toContain(
      "validation_failed",
    );
    expect(checkFormInput({ fields: ["Email", "Name"] }, fields, [11])).toMatchObject({
      fields: [11, 10],
    });
    // Changes that leave the shown fields alone are not checked again.
    expect(checkFormInput({ name: "Leads" }, fields, [10])).toEqual({ name: "Leads" });
  });
});
