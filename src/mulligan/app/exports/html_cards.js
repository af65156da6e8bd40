// An entry of the session as the page shows it: its tree row's words (`summaryOf`), its card
// (`cardOf`) and its words for the search (`textOf`), made in the page from the entry as the
// file holds it -- which may be crafted or damaged: nothing here assumes a shape beyond what it
// checks, and every piece of it becomes text (textContent, an attribute set as a property),
// never markup. Markdown goes in a div.md as its source; the page renders it (html_page.js).
// The one-line forms are brief.py's (message_line, call_text, flat, cut), for the same rows
// `/tree` draws.

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
function str(value) {  // as Python's str() shows a value, near enough for a page
  if (value == null) return "None";
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "True" : "False";
  return typeof value === "object" ? json(value) : String(value);
}
function json(value, indent) {
  try { return JSON.stringify(value ?? null, null, indent) ?? "null"; } catch { return String(value); }
}
function flat(text, room) {  // on one line; with room, only as much as a line of room shows
  text = str(text);
  if (room != null && text.length > 2 * room + 64) {
    const head = text.slice(0, 2 * room + 64).split(/\s+/).filter(Boolean).join(" ");
    if (head.length > room) return head;
  }
  return text.split(/\s+/).filter(Boolean).join(" ");
}
function cut(text, room) {
  if (room == null || text.length <= room) return text;
  return room <= 1 ? "…" : text.slice(0, room - 1) + "…";
}
function imageNote(block) {
  const size = Math.floor(str(block.data ?? "").length * 3 / 4);
  return `[image: ${str(block.mime_type ?? "?")}, ${(size / 1024).toFixed(1)} KB]`;
}
function contentText(content) {  // blocks as their text, each image as its note
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content == null ? "" : str(content);
  const parts = [];
  for (const block of content) {
    if (isObject(block) && block.type === "text") parts.push(str(block.text ?? ""));
    else if (isObject(block) && block.type === "image") parts.push(imageNote(block));
  }
  return parts.join("\n");
}
function words(content) {  // the text of a content, images left out (drawn as images)
  if (!Array.isArray(content)) return contentText(content);
  return content.filter((b) => isObject(b) && b.type === "text").map((b) => str(b.text ?? ""))
    .join("\n");
}
const blocksOf = (message) => (Array.isArray(message.content) ? message.content : [])
  .filter(isObject);
const messageOf = (entry) => (entry.type === "message" && isObject(entry.message)
  ? entry.message : null);
function callText(block, room) {  // read(main.py); a call of several arguments, as JSON
  const args = block.arguments;
  let text = json(args);
  if (isObject(args) && Object.keys(args).length === 1) {
    const value = Object.values(args)[0];
    text = typeof value === "string" ? value : json(value);
  }
  return cut(`${str(block.name)}(${cut(flat(text, room), room)})`, room);
}
function messageLine(message, room) {  // you: ..., ai: ... read(main.py), read → ...
  const role = message.role;
  if (role === "user") return "you: " + flat(contentText(message.content ?? ""), room);
  if (role === "toolResult") {
    return `${str(message.tool_name ?? "tool")}${message.is_error ? " (error)" : ""} → ` +
      flat(contentText(message.content ?? ""), room);
  }
  const parts = [];
  for (const block of blocksOf(message)) {
    if (block.type === "text") { const text = flat(block.text ?? "", room); if (text) parts.push(text); }
    else if (block.type === "toolCall") parts.push(callText(block, room == null ? null : room + 1));
  }
  if (["error", "aborted"].includes(message.stop_reason)) {
    const reason = message.stop_reason, why = flat(message.error_message ?? "");
    parts.push(why && why !== reason ? `[${reason}: ${why}]` : `[${reason}]`);
  }
  return "ai: " + (parts.length ? parts.join(" ") : "(empty)");
}
function summaryOf(entry, room) {  // a tree row's words after the id
  const kind = entry.type;
  let text = str(kind);
  if (kind === "message") {
    const message = messageOf(entry);
    text = message ? messageLine(message, room) : "(damaged message entry)";
  } else if (kind === "branch") {
    text = `↩ back to ${str(entry.parent_id)}`;
  } else if (kind === "branch_summary" || kind === "compaction") {
    text = (kind === "branch_summary" ? "↩ summary: " : "⊟ compacted: ") + flat(entry.summary ?? "", room);
  }
  return cut(text, room);
}

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text != null) made.textContent = text;
  if (className) made.className = className;
  return made;
}
function folded(className, summary, ...body) {  // <details><summary>…</summary>…</details>
  const details = element("details", null, className);
  details.append(element("summary", summary), ...body);
  return details;
}
const markdownSource = (text) => element("div", str(text), "md");
const SHOWN = ["image/png", "image/jpeg", "image/gif", "image/webp"];
function images(content) {  // as data: URLs (the page's policy allows only those)
  const out = [];
  for (const block of Array.isArray(content) ? content : []) {
    if (!isObject(block) || block.type !== "image") continue;
    const {mime_type: mime, data} = block;
    if (SHOWN.includes(mime) && typeof data === "string" && /^[A-Za-z0-9+/]*={0,2}$/.test(data)) {
      const image = element("img", null, "shot");
      image.alt = imageNote(block);
      image.src = `data:${mime};base64,${data}`;
      out.push(image);
    } else {  // hostile or broken: its note, never in the page
      out.push(element("p", imageNote(block)));
    }
  }
  return out;
}
function diff(change) {  // a tool call's file changes, made by the export from its checkpoints
  if (!isObject(change)) return [];
  if (!Array.isArray(change.lines)) {
    return [element("p", `changed: ${str(change.changed)} (snapshots not in the store)`)];
  }
  const pre = element("pre");
  change.lines.forEach((line, at) => {
    line = str(line);
    const css = line.startsWith("+") ? "add" : line.startsWith("-") ? "del"
      : line.startsWith("@@") ? "hunk" : "";
    pre.append(...(at ? ["\n"] : []), element("span", line, css));
  });
  const details = folded("diff", `changed ${str(change.changed)}`, pre);
  details.open = true;
  return [details];
}
function messageCard(message, change) {  // [css class, who, the body's elements]
  const role = str(message.role);
  if (role === "user") return ["user", "you", [markdownSource(words(message.content)),
                                              ...images(message.content)]];
  if (role === "toolResult") {
    const flag = message.is_error ? " (error)" : "";
    const first = cut(flat(contentText(message.content)), 100);
    return ["toolResult" + (flag ? " error" : ""), `${str(message.tool_name)} result`, [
      folded("result", `${str(message.tool_name)}${flag} → ${first}`,
             element("pre", words(message.content)), ...images(message.content)),
      ...diff(change)]];
  }
  const body = [];
  for (const block of blocksOf(message)) {
    if (block.type === "text") body.push(markdownSource(block.text ?? ""));
    else if (block.type === "thinking" && block.thinking) {
      body.push(folded(null, "thinking", element("pre", str(block.thinking))));
    } else if (block.type === "toolCall") {
      body.push(folded("call", callText(block, 100), element("pre", json(block.arguments, 2))));
    }
  }
  const failed = ["error", "aborted"].includes(message.stop_reason);
  if (failed) body.push(element("p", `${message.stop_reason}: ${str(message.error_message ?? "")}`, "err"));
  return ["assistant" + (failed ? " error" : ""), "assistant", body];
}
const FACTS = ["name", "model", "cwd", "created", "origin_file"];
function cardOf(entry, label, change) {  // the entry's <article>, Markdown not yet rendered
  const id = entry.id, kind = entry.type;
  const card = element("article", null, "card");
  card.id = card.dataset.id = id;
  const head = element("div", null, "head"), link = element("a", id);
  link.href = "#" + encodeURIComponent(id);
  head.append(link, element("span", str(entry.timestamp ?? "")));
  if (label != null) head.append(" · ", element("span", label, "label"));
  let body;
  if (kind === "message") {
    const message = messageOf(entry);
    if (!message) body = [element("p", "(a message entry without a message object)")];
    else {
      const [css, who, made] = messageCard(message, change);
      card.className = css;
      head.append(element("span", who));
      body = made;
    }
  } else if (kind === "branch_summary" || kind === "compaction") {
    head.append(element("span", kind === "branch_summary" ? "Summary of the attempt left"
      : "Compaction: summary of the conversation before it"));
    body = [markdownSource(entry.summary ?? "")];
  } else if (kind === "branch") {
    body = [element("p", `↩ went back to ${str(entry.parent_id)}`)];
  } else if (kind === "session_info") {
    const facts = FACTS.filter((k) => entry[k]).map((k) => `${k}: ${str(entry[k])}`);
    body = [element("p", `session · ${facts.join(" · ")}`)];
  } else if (kind === "workspace_restore") {
    const meta = isObject(entry.workspace) ? entry.workspace : {};
    const names = (list) => (Array.isArray(list) ? list.map(str).join(", ") : str(list ?? "")) || "none";
    body = [element("p", `files restored: ${names(meta.restored)}; kept: ${names(meta.kept)}`)];
  } else {
    body = [element("p", str(kind))];
  }
  card.append(head, ...body);
  return card;
}
function textOf(entry, label, change) {  // what the search looks in: the card's words
  const parts = [entry.id, str(entry.timestamp ?? ""), label ?? ""];
  const message = messageOf(entry);
  if (message && ["user", "toolResult"].includes(message.role)) {  // its words once, whole
    parts.push(message.role === "user" ? "you" : str(message.tool_name), contentText(message.content));
  } else {
    parts.push(summaryOf(entry));
  }
  for (const block of message ? blocksOf(message) : []) {
    if (block.type === "thinking") parts.push(str(block.thinking ?? ""));
    else if (block.type === "toolCall") parts.push(json(block.arguments, 2));
  }
  if (isObject(change)) parts.push(str(change.changed), ...(change.lines || []).map(str));
  return parts.join("\n");
}
