// CSV and JSON downloads of what the page shows (the Pending list, a what-if result), made in the browser from the
// JSON it already has: a Blob and a temporary <a download>, nothing sent anywhere.

const FORMULA = /^[=+\-@\t\r]/; // a spreadsheet would run a cell starting so: prefixed with ' (OWASP's CSV advice)

function cell(value) {
  let text = value === null || value === undefined ? "" : String(value);
  if (FORMULA.test(text)) text = `'${text}`;
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** RFC 4180 CSV: a header of `columns`, then one line per row (an object read by column name). */
export function toCSV(columns, rows) {
  return [columns.map(cell).join(","), ...rows.map((r) => columns.map((c) => cell(r[c])).join(","))].join("\r\n")
    + "\r\n";
}

export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function requestsText(requests) {
  return Object.entries(requests || {}).map(([k, v]) => `${k}=${v}`).join(";");
}

export const PENDING_COLUMNS = ["namespace", "name", "gang", "owner", "status", "priority", "devices", "requests",
  "message"];

/** One row per Pending pod (a gang's members each, with the gang named). */
export function pendingRows(entries) {
  const rows = [];
  for (const e of entries || []) {
    if (e.kind === "gang") {
      for (const m of e.members || []) {
        rows.push({ namespace: m.namespace, name: m.name, gang: e.key, owner: "", status: m.status,
          priority: e.priority ?? 0, devices: "", requests: "", message: m.message });
      }
    } else {
      rows.push({ namespace: e.namespace, name: e.name, gang: "", owner: e.owner || "", status: e.status,
        priority: e.priority ?? 0, devices: e.devices ?? 0, requests: requestsText(e.requests), message: e.message });
    }
  }
  return rows;
}

export const WHATIF_COLUMNS = ["change", "pod", "from", "to", "cause", "recreated", "message"];

/** One row per pod the what-if changes: lost, moved, placed, evicted, replaced (placed elsewhere by the run). */
export function whatifRows(result) {
  const rows = [];
  for (const change of ["lost", "moved", "placed", "evicted", "replaced"]) {
    for (const x of result[change] || []) {
      rows.push({ change, pod: x.pod, from: x.from ?? "", to: x.to ?? "", cause: x.cause ?? "",
        recreated: x.recreated === undefined ? "" : String(x.recreated), message: x.message ?? "" });
    }
  }
  return rows;
}
