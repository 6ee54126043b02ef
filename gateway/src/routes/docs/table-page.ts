/**
 * The per-table docs page, `GET /docs/tables/{table_id}`: a page of its own (no Swagger UI) that
 * asks for a token, keeps it in a variable of its script only (never the address, storage or a
 * cookie), reads the table (`/table/get`) and its OpenAPI document keyed by names with it, and
 * shows the fields, each record route with an example request and answer, copy-paste curl and
 * fetch snippets (with `$ROWBASE_TOKEN`, never the token itself) and a "Try it" that sends the
 * call. Everything comes from this gateway; the script is a file, so that the CSP forbids
 * inline scripts.
 */

export const TABLE_PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="referrer" content="no-referrer">
    <title>Rowbase table API</title>
    <link rel="stylesheet" href="/docs/table-page.css">
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
  </head>
  <body>
    <header>
      <h1>Rowbase table API</h1>
      <p>This table's record routes with its own fields. Enter an API token (<code>rb_...</code>) of the table's organization or a member's session token: it stays in this page only (not in the address, storage or cookies) and is gone when you leave or reload.</p>
      <form id="token-form" autocomplete="off">
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" placeholder="rb_... or a session token">
        <button type="submit">Show the API</button>
        <button type="button" id="forget">Forget the token</button>
      </form>
      <p id="status" class="status" role="status"></p>
    </header>
    <main id="api"></main>
    <script src="/docs/table-page.js"></script>
  </body>
</html>
`;

export const TABLE_PAGE_STYLE = `body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header, main { max-width: 1100px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 16px; }
h1 { font-size: 26px; margin: 8px 0; }
h2 { font-size: 20px; margin: 28px 0 8px; }
h3 { font-size: 16px; margin: 0 0 4px; }
h4 { font-size: 13px; margin: 8px 0 4px; color: #59636e; }
code, pre, textarea, input.query, input.row-id { font-family: ui-monospace, monospace; font-size: 13px; }
form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
#token { flex: 1; min-width: 260px; padding: 6px 8px; }
button { padding: 6px 12px; border: 1px solid #1f6feb; background: #1f6feb; color: #fff; border-radius: 6px; cursor: pointer; }
button[type=button]#forget { background: #fff; color: #1f6feb; }
button:disabled { opacity: 0.6; }
.status { min-height: 1.5em; color: #1a7f37; }
.status.error { color: #cf222e; }
.summary { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 4px 16px; }
.summary h2 { margin-top: 12px; }
.summary p { margin: 6px 0; }
table.fields { border-collapse: collapse; width: 100%; background: #fff; }
table.fields th, table.fields td { border: 1px solid #d1d9e0; padding: 4px 8px; text-align: left; vertical-align: top; }
table.fields th { background: #eef1f4; }
.route { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
.method { display: inline-block; min-width: 56px; text-align: center; border-radius: 4px; color: #fff; font-size: 12px; padding: 1px 6px; }
.method.get { background: #0969da; } .method.post { background: #1a7f37; }
.method.patch { background: #9a6700; } .method.delete { background: #cf222e; }
.inputs { display: flex; gap: 16px; flex-wrap: wrap; }
label.block { display: block; margin-top: 8px; }
textarea { display: block; width: 100%; box-sizing: border-box; }
pre { background: #f6f8fa; border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px; overflow-x: auto; margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
.snippets { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.try-row { margin-top: 8px; }
.result { max-height: 360px; overflow: auto; }
.result:empty { display: none; }
@media (max-width: 800px) { .snippets { grid-template-columns: 1fr; } }
`;

export const TABLE_PAGE_SCRIPT = String.raw`"use strict";
(function () {
  // The token lives in this closure only: never in the URL, storage or a cookie.
  var token = "";
  var tableId = (location.pathname.match(/\/docs\/tables\/(\d+)\/?$/) || [])[1];
  var form = document.getElementById("token-form");
  var input = document.getElementById("token");
  var status = document.getElementById("status");
  var api = document.getElementById("api");

  function el(tag, attributes, children) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      if (key === "text") node.textContent = attributes[key];
      else node.setAttribute(key, attributes[key]);
    });
    (children || []).forEach(function (child) {
      if (child) node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  function call(method, path, body) {
    var init = { method: method, headers: { Authorization: "Bearer " + token } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = body;
    }
    return fetch(path, init).then(function (response) {
      return response.text().then(function (text) {
        var parsed = text;
        try {
          parsed = JSON.parse(text);
        } catch (e) {}
        return { status: response.status, body: parsed };
      });
    });
  }

  function say(text, isError) {
    status.textContent = text;
    status.className = isError ? "status error" : "status";
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    token = input.value.trim();
    input.value = "";
    if (!token) return say("Enter an API token or a session token.", true);
    api.replaceChildren();
    say("Loading table " + tableId + "...");
    load().catch(function (error) {
      say("Could not load the table: " + error.message, true);
    });
  });

  document.getElementById("forget").addEventListener("click", function () {
    token = "";
    api.replaceChildren();
    say("Token forgotten.");
  });

  function load() {
    return call("GET", "/table/get?table_id=" + tableId).then(function (table) {
      if (table.status !== 200) throw new Error(explain(table, "/table/get"));
      var t = table.body.data.table;
      var documentPath =
        "/public/v1/databases/" + t.database_id + "/tables/" + t.table_id + "/openapi.json";
      return call("GET", documentPath + "?response_format=names").then(function (doc) {
        if (doc.status !== 200) throw new Error(explain(doc, documentPath));
        render(t, table.body.data.fields, doc.body, documentPath);
        say("Showing table " + t.name + ". Calls below send your token from this page only.");
      });
    });
  }

  function explain(answer, path) {
    var code = answer.body && answer.body.message;
    if (answer.status === 401) return "the token was not accepted on " + path + " (401 " + code + ")";
    if (answer.status === 404) return "no such table for this token (404 " + code + ")";
    return path + " answered " + answer.status + " " + (code || "");
  }

  function render(table, fields, doc, documentPath) {
    var schemas = doc.components.schemas;
    var byName = schemas.RecordDataByName.properties;
    var writable = schemas.RecordCreateData.properties;
    var required = schemas.RecordCreateData.required || [];
    var base = (doc.servers && doc.servers[0] && doc.servers[0].url) || location.origin;

    api.appendChild(
      el("section", { class: "summary" }, [
        el("h2", { text: table.name }),
        el("p", {
          text:
            "Table " + table.table_id + " in database " + table.database_id +
            " · schema version " + doc.info.version,
        }),
        el("p", {}, [
          "OpenAPI document for code generators: ",
          el("code", { text: "GET " + documentPath + "?response_format=names" }),
          " (with your token).",
        ]),
      ]),
    );

    var rows = fields.map(function (field) {
      var schema = byName[field.name] || {};
      var choices = (field.options && field.options.choices) || [];
      return el("tr", {}, [
        el("td", {}, [el("code", { text: field.name })]),
        el("td", { text: String(field.field_id) }),
        el("td", {
          text:
            field.type +
            (choices.length ? ": " + choices.map(function (c) { return c.name; }).join(", ") : ""),
        }),
        el("td", {
          text: !writable[field.name] ? "read-only" : required.indexOf(field.name) >= 0 ? "required" : "optional",
        }),
        el("td", {}, [el("code", { text: JSON.stringify((schema.examples || [null])[0]) })]),
      ]);
    });
    api.appendChild(
      el("section", {}, [
        el("h2", { text: "Fields" }),
        el("table", { class: "fields" }, [
          el("thead", {}, [
            el("tr", {}, ["Name", "Id", "Type", "Writing", "Example"].map(function (h) {
              return el("th", { text: h });
            })),
          ]),
          el("tbody", {}, rows),
        ]),
      ]),
    );

    var v1 = "/public/v1/databases/" + table.database_id + "/tables/" + table.table_id;
    var createExample = (schemas.RecordCreateData.examples || [{}])[0];
    var updateExample = (schemas.RecordUpdateData.examples || [{}])[0];
    var readRecord = record((schemas.RecordDataByName.examples || [{}])[0]);
    var writtenRecord = record((schemas.RecordData.examples || [{}])[0]);
    var routes = [
      {
        id: "list", method: "GET", path: v1 + "/records", query: "response_format=names&limit=10",
        summary: "List records (filter with where, order with sort; keys by name)",
        answer: { records: [readRecord], total: 1, has_more: false, limit: 10, offset: 0 },
      },
      {
        id: "get", method: "GET", path: v1 + "/records/{row_id}", query: "response_format=names",
        summary: "Get one record", answer: { record: readRecord },
      },
      {
        id: "create", method: "POST", path: v1 + "/records", body: { data: createExample },
        summary: "Create a record (the answer is keyed by field id)", answer: { record: writtenRecord },
      },
      {
        id: "update", method: "PATCH", path: v1 + "/records/{row_id}", body: { data: updateExample },
        summary: "Change the named fields of a record (the answer is keyed by field id)",
        answer: { record: writtenRecord },
      },
      {
        id: "delete", method: "DELETE", path: v1 + "/records/{row_id}",
        summary: "Delete a record", answer: { deleted_id: 1 },
      },
      {
        id: "batch-create", method: "POST", path: v1 + "/records/batch",
        body: { records: [{ data: createExample }] },
        summary: "Create up to 1000 records, all or none", answer: { records: [writtenRecord] },
      },
      {
        id: "batch-update", method: "PATCH", path: v1 + "/records/batch",
        body: { records: [{ row_id: 1, data: updateExample }] },
        summary: "Change up to 1000 records, all or none", answer: { records: [writtenRecord] },
      },
      {
        id: "batch-delete", method: "POST", path: v1 + "/records/batch_delete",
        body: { row_ids: [1] }, summary: "Delete up to 1000 records, all or none",
        answer: { deleted_ids: [1] },
      },
    ];
    api.appendChild(el("h2", { text: "Routes" }));
    api.appendChild(
      el("p", {}, [
        "The same records answer the query-form routes (",
        el("code", { text: "/public/record/list?database_id=" + table.database_id + "&table_id=" + table.table_id }),
        " and the others), which the OpenAPI document describes too.",
      ]),
    );
    routes.forEach(function (route) {
      api.appendChild(routeCard(route, base));
    });
  }

  function record(data) {
    return {
      row_id: 1, table_id: Number(tableId), created_at: "2026-01-15T09:30:00.000Z",
      updated_at: "2026-01-15T09:30:00.000Z", data: data,
    };
  }

  function routeCard(route, base) {
    var rowInput = route.path.indexOf("{row_id}") >= 0
      ? el("input", { class: "row-id", value: "1", "aria-label": "row_id", size: "8" })
      : null;
    var queryInput = route.query !== undefined
      ? el("input", { class: "query", value: route.query, "aria-label": "query string", size: "40" })
      : null;
    var bodyInput = route.body !== undefined
      ? el("textarea", { class: "body", "aria-label": "request body", spellcheck: "false" })
      : null;
    if (bodyInput) {
      bodyInput.value = pretty(route.body);
      bodyInput.rows = Math.min(bodyInput.value.split("\n").length, 16);
    }
    var curl = el("pre", { class: "snippet curl" });
    var js = el("pre", { class: "snippet js" });
    var result = el("pre", { class: "result", "aria-live": "polite" });
    var button = el("button", { type: "button", class: "try", text: "Try it" });

    function target() {
      var path = route.path.replace("{row_id}", encodeURIComponent(rowInput ? rowInput.value.trim() : ""));
      var query = queryInput ? queryInput.value.trim().replace(/^\?/, "") : "";
      return path + (query ? "?" + query : "");
    }
    function snippets() {
      var url = base + target();
      var body = bodyInput ? bodyInput.value : undefined;
      var compact = body === undefined ? undefined : compactJson(body);
      curl.textContent =
        "curl -X " + route.method + " '" + url + "' \\\n" +
        "  -H \"Authorization: Bearer $ROWBASE_TOKEN\"" +
        (compact === undefined ? "" : " \\\n  -H 'Content-Type: application/json' \\\n  -d '" + compact.replace(/'/g, "'\\''") + "'");
      js.textContent =
        "const response = await fetch(" + JSON.stringify(url) + ", {\n" +
        "  method: " + JSON.stringify(route.method) + ",\n" +
        "  headers: {\n    Authorization: \"Bearer \" + process.env.ROWBASE_TOKEN," +
        (compact === undefined ? "\n  },\n" : "\n    \"Content-Type\": \"application/json\",\n  },\n  body: JSON.stringify(" + (body || "").trim().replace(/\n/g, "\n  ") + "),\n") +
        "});\nconst { data } = await response.json();";
    }
    [rowInput, queryInput, bodyInput].forEach(function (field) {
      if (field) field.addEventListener("input", snippets);
    });
    snippets();

    button.addEventListener("click", function () {
      if (!token) return say("Enter a token first.", true);
      button.disabled = true;
      result.textContent = "Sending...";
      call(route.method, target(), bodyInput ? bodyInput.value : undefined)
        .then(function (answer) {
          result.textContent = answer.status + "\n" + (typeof answer.body === "string" ? answer.body : pretty(answer.body));
        })
        .catch(function (error) {
          result.textContent = "Failed: " + error.message;
        })
        .finally(function () {
          button.disabled = false;
        });
    });

    return el("section", { class: "route", id: "route-" + route.id }, [
      el("h3", {}, [el("span", { class: "method " + route.method.toLowerCase(), text: route.method }), " ", el("code", { text: route.path })]),
      el("p", { text: route.summary }),
      el("div", { class: "inputs" }, [
        rowInput && el("label", {}, ["row_id ", rowInput]),
        queryInput && el("label", {}, ["query ", queryInput]),
      ]),
      bodyInput && el("label", { class: "block" }, ["Request body", bodyInput]),
      el("details", {}, [el("summary", { text: "Example answer" }), el("pre", { text: pretty({ message: "success", data: route.answer }) })]),
      el("div", { class: "snippets" }, [
        el("div", {}, [el("h4", { text: "curl" }), curl]),
        el("div", {}, [el("h4", { text: "JavaScript (fetch)" }), js]),
      ]),
      el("div", { class: "try-row" }, [button]),
      result,
    ]);
  }

  function compactJson(text) {
    try {
      return JSON.stringify(JSON.parse(text));
    } catch (e) {
      return text;
    }
  }

  if (!tableId) say("No table id in this page's address.", true);
})();
`;
