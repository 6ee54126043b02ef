import { type Layer, Router } from "@koa/router";
import { describe, expect, it } from "vitest";
import { pathRegExp, ROUTER_OPTIONS, restrictParams } from "./path-pattern.js";

const PATH = "/public/v1/databases/:database_id/tables/:table_id/records/:row_id";

/** A layer as the gateway's router compiles it (the class itself is not exported at runtime). */
const layerOf = (path: string) =>
  new Router(ROUTER_OPTIONS).register(path, ["GET"], async () => {}) as Layer;

describe("pathRegExp", () => {
  it("matches what @koa/router matches when nothing is restricted", () => {
    const ours = pathRegExp(PATH, {});
    const theirs = layerOf(PATH).regexp;
    for (const path of [
      "/public/v1/databases/1/tables/2/records/3",
      "/public/v1/databases/1/tables/2/records/3/",
      "/public/v1/databases/x/tables/y/records/batch",
      "/PUBLIC/v1/databases/x/tables/y/records/batch",
      "/public/v1/databases/1/tables/2/records",
      "/public/v1/databases/1/tables/2/records/3/4",
      "/public/v1/databases//tables/2/records/3",
      "/public/v1/databases/1/tables/2/records/3//",
    ]) {
      expect({ path, match: ours.exec(path)?.slice(1) }).toEqual({
        path,
        match: theirs.exec(path)?.slice(1),
      });
    }
  });

  it("holds a restricted parameter to its pattern, the others as before", () => {
    const regexp = pathRegExp(PATH, { row_id: "[0-9]+" });
    expect(regexp.exec("/public/v1/databases/1/tables/2/records/345")?.slice(1)).toEqual([
      "1",
      "2",
      "345",
    ]);
    expect(regexp.exec("/public/v1/databases/a/tables/b/records/7")?.slice(1)).toEqual([
      "a",
      "b",
      "7",
    ]);
    expect(regexp.test("/public/v1/databases/a/tables/b/records/7/")).toBe(false);
    for (const rowId of ["batch", "batch_delete", "-1", "1e3", "12a", "%31", ""]) {
      expect({
        rowId,
        match: regexp.test(`/public/v1/databases/1/tables/2/records/${rowId}`),
      }).toEqual({ rowId, match: false });
    }
  });

  it("escapes the literal parts", () => {
    const regexp = pathRegExp("/t/:table_id/openapi.json", { table_id: "[0-9]+" });
    expect(regexp.test("/t/1/openapi.json")).toBe(true);
    expect(regexp.test("/t/1/openapiXjson")).toBe(false);
  });

  it("refuses a pattern for a parameter the path does not have, and wildcard paths", () => {
    expect(() => pathRegExp("/x/:id", { row_id: "[0-9]+" })).toThrow(/no parameter 'row_id'/);
    expect(() => pathRegExp("/files/{*path}", {})).toThrow(/wildcard/);
  });
});

describe("restrictParams", () => {
  it("narrows a router layer, whose parameters keep their names", () => {
    const layer = layerOf("/a/:x/b/:y");
    restrictParams(layer, { y: "[0-9]+" });
    expect(layer.match("/a/q/b/z")).toBe(false);
    expect(layer.match("/a/q/b/12")).toBe(true);
    expect(layer.params("/a/q/b/12", layer.captures("/a/q/b/12"))).toEqual({ x: "q", y: "12" });
  });

  it("refuses a layer whose parameters the router reads differently", () => {
    const layer = { path: "/a/:x/b/:y", paramNames: [{ name: "y" }], regexp: /unused/ };
    expect(() => restrictParams(layer, { y: "[0-9]+" })).toThrow(/other parameters/);
  });
});
