// The page's script (see html.py): it reads the session file the page embeds (gzipped) and
// builds, in the page, the tree's rows and the cards of what is shown -- the export only zips
// the file. Every piece of an entry is text: elements are made with createElement and filled
// with textContent, never innerHTML, except Markdown rendered by markdown-it with raw HTML off
// (below). Elements of the page are found by tag and id: a card's id is an entry id, which
// may be any text -- "search" or "page-data" too. Ids are kept in Maps, not objects, for the
// same reason ("__proto__" is an id like any).
// cardOf, summaryOf and textOf are html_cards.js's: the export puts that file first in this one
// script (a page that fetches nothing has no modules to import).

async function unzipped(script) {  // the bytes of a <script> holding base64 of gzip
  const text = atob(document.querySelector(script).textContent.trim());
  // A plain loop: Uint8Array.from with a function per byte took 1 s for a 20 MB page.
  const zipped = new Uint8Array(text.length);
  for (let at = 0; at < text.length; at++) zipped[at] = text.charCodeAt(at);
  const stream = new Blob([zipped]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
const decoded = (bytes) => new TextDecoder("utf-8", {ignoreBOM: true}).decode(bytes);
const sessionBytes = () => unzipped("script#session-jsonl");  // the session file
const [fileText, dataText] = await Promise.all([sessionBytes().then(decoded),
                                                unzipped("script#page-data").then(decoded)]);
// What only the export knows: the tip, the labels, each tool call's file changes as a diff.
const data = JSON.parse(dataText);
const labels = new Map(Object.entries(data.labels)), changes = new Map(Object.entries(data.changes));

// The entries: each line of the file that is a JSON object with a string id (a damaged line
// is left out here; `mulligan session check` names it). The first entry of an id wins.
const byId = new Map(), hidden = new Set();  // hidden: label entries, not shown as rows
for (const line of fileText.split("\n")) {
  if (!line.trim()) continue;
  let entry;
  try { entry = JSON.parse(line); } catch { continue; }
  if (!entry || typeof entry !== "object" || typeof entry.id !== "string" || byId.has(entry.id)) continue;
  byId.set(entry.id, entry);
  if (entry.type === "label") hidden.add(entry.id);
}
// A label is an entry of the file but not of the page: its child hangs from its parent, so
// the branch through a labelled entry is whole. A circle (a damaged file) ends at null.
function shownParent(id) {
  const seen = new Set([id]);
  let up = byId.get(id).parent_id;
  while (hidden.has(up) && !seen.has(up)) { seen.add(up); up = byId.get(up).parent_id; }
  return typeof up === "string" && byId.has(up) && !hidden.has(up) ? up : null;
}
const parents = new Map(), order = [], position = new Map(), children = new Map();
for (const id of byId.keys()) {
  if (hidden.has(id)) continue;
  const up = shownParent(id);
  parents.set(id, up);
  position.set(id, order.length);
  order.push(id);
  if (!children.has(up)) children.set(up, []);
  children.get(up).push(id);
}
function pathTo(id) {
  const path = [], seen = new Set();
  while (id != null && !seen.has(id) && parents.has(id)) {
    seen.add(id); path.push(id); id = parents.get(id);
  }
  return path.reverse();
}
const tip = (() => {  // the newest shown entry on the tip's branch
  let id = data.tip;
  const seen = new Set();
  while (hidden.has(id) && !seen.has(id)) { seen.add(id); id = byId.get(id).parent_id; }
  return parents.has(id) ? id : null;
})();
function newestBelow(id) {  // the end of the attempt through id: its newest descendant
  let best = id;
  const stack = [id], seen = new Set(stack);
  while (stack.length) {
    const at = stack.pop();
    if (position.get(at) > position.get(best)) best = at;
    for (const kid of children.get(at) || []) if (!seen.has(kid)) { seen.add(kid); stack.push(kid); }
  }
  return best;
}
let branch = new Set(), selected = null, found = new Set();

// The tree's rows, in the shape of /tree: the current path down the left, each attempt off
// it folded behind a button at its fork point, its rows after it, one deeper. A row is
// ["a", id, depth, attempt it is folded in or ""] or ["f", attempt, depth, attempt around it
// or "", fork id]. Walked with a stack, not recursion: 2,000 attempts nested in each other are
// 2,000 levels of indent, not a stack overflow (nor 2,000 nested elements).
const tipPath = new Set(pathTo(tip));
const rows = [];
{
  const roots = children.get(null) || [];
  const mainRoot = roots.find((r) => tipPath.has(r)) ?? roots[roots.length - 1];
  const stack = [...roots.filter((r) => r !== mainRoot), ...(mainRoot ? [mainRoot] : [])]
    .reverse().map((r) => [r, 0, "", null]);
  const drawn = new Set();
  let attempts = 0;
  while (stack.length) {
    const [id, depth, group, outer] = stack.pop();
    if (drawn.has(id)) continue;
    drawn.add(id);
    if (outer !== null) rows.push(["f", group, depth - 1, outer, parents.get(id) || ""]);
    rows.push(["a", id, depth, group]);
    const below = children.get(id);
    if (!below) continue;
    const main = below.find((k) => tipPath.has(k)) ?? below[below.length - 1];
    stack.push([main, depth, group, null]);  // drawn after every attempt off here
    for (const side of below.filter((k) => k !== main).reverse()) {
      attempts += 1;
      stack.push([side, depth + 1, `f${attempts}`, group]);
    }
  }
}

// Only the rows in view are made into elements and put in the document. Rows are ROW pixels
// high; an attempt's rows follow its fold button, one level deeper, up to `ends` of it.
const ROW = 22;
const tree = document.querySelector("nav div.tree"), sheet = tree.firstElementChild;
const links = new Map(), folds = new Map(), made = new Map();
rows.forEach((row, at) => (row[0] === "a" ? links : folds).set(row[1], at));
function rowElement(at) {  // made once, when first drawn
  let element = made.get(at);
  if (element) return element;
  const row = rows[at];
  if (row[0] === "a") {
    element = document.createElement("a");
    element.href = "#" + encodeURIComponent(row[1]);
    element.dataset.id = row[1];
    if (row[1] === tip) element.className = "tip";
    element.textContent = `${row[1]} ${summaryOf(byId.get(row[1]), 90)}`;
    if (labels.has(row[1])) {
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = `[${labels.get(row[1])}]`;
      element.append(" ", label);
    }
  } else {
    element = document.createElement("button");
    element.type = "button";
    element.className = "fold";
    element.dataset.fold = row[1];
    element.textContent = `an attempt from ${row[4]}`;
  }
  element.style.setProperty("--d", String(row[2]));
  element.dataset.at = String(at);
  made.set(at, element);
  return element;
}
const ends = new Map();  // a fold's row -> the row just past its attempt's rows
{
  const open = [];
  rows.forEach((row, at) => {
    while (open.length && rows[open[open.length - 1]][2] >= row[2]) ends.set(open.pop(), at);
    if (row[0] === "f") open.push(at);
  });
  for (const at of open) ends.set(at, rows.length);
}
const unfolded = new Set();  // the fold rows opened
let listed = [];  // the rows to list, in order: those no folded attempt hides
function relist() {
  listed = [];
  for (let at = 0; at < rows.length;) {
    listed.push(at);
    at = ends.has(at) && !unfolded.has(at) ? ends.get(at) : at + 1;
  }
  sheet.style.height = `${listed.length * ROW}px`;
}
let drawing = null;
function draw() {  // the rows in view, and a screenful either side
  drawing = null;
  const first = Math.max(0, Math.floor(tree.scrollTop / ROW) - 30);
  const last = Math.min(listed.length, first + Math.ceil(tree.clientHeight / ROW) + 60);
  const shown = [];
  for (let i = first; i < last; i++) {
    const row = rowElement(listed[i]), id = row.dataset.id;
    row.style.top = `${i * ROW}px`;
    if (id != null) {
      row.classList.toggle("on-branch", branch.has(id));
      row.classList.toggle("selected", id === selected);
      row.classList.toggle("found", found.has(id));
    } else {
      row.setAttribute("aria-expanded", String(unfolded.has(listed[i])));
    }
    shown.push(row);
  }
  sheet.replaceChildren(...shown);
}
function redraw() { if (drawing == null) drawing = requestAnimationFrame(draw); }
tree.addEventListener("scroll", redraw);
window.addEventListener("resize", redraw);
function setFold(at, open) {
  if (open) unfolded.add(at); else unfolded.delete(at);
  relist();
  draw();
}
function unfoldTo(id) {  // every attempt around an entry's row
  let changed = false;
  for (let at = folds.get(rows[links.get(id)]?.[3]); at != null; at = folds.get(rows[at][3])) {
    if (!unfolded.has(at)) { unfolded.add(at); changed = true; }
  }
  if (changed) relist();
}
function rowIntoView(id) {
  const at = listed.indexOf(links.get(id));
  if (at < 0) return;
  const top = at * ROW;
  if (top < tree.scrollTop || top + ROW > tree.scrollTop + tree.clientHeight) {
    tree.scrollTop = Math.max(0, top - tree.clientHeight / 2);
  }
}

// The cards: each is made from its entry when first shown; only a window of the list shown
// -- the branch, or the search's matches -- is in the document, and it grows as it is
// scrolled to its ends. A click costs the window, not the session.
// A card's Markdown (its source as the text of a div.md) is rendered as the card is made, by
// markdown-it when the export embedded it: raw HTML off (it is text), and a link or image only
// to http(s), mailto, #anchors or a data: image -- anything else (javascript:) stays text.
const markdown = window.markdownit ? window.markdownit("commonmark", {html: false}).enable("table")
  : null;
if (markdown) {
  markdown.validateLink = (url) =>
    /^(https?:|mailto:|#|data:image\/(png|jpeg|gif|webp);)/i.test(url.trim());
}
function rendered(card) {
  if (markdown) {
    for (const md of card.querySelectorAll("div.md")) {
      md.innerHTML = markdown.render(md.textContent);  // markdown-it's HTML, raw HTML off
      md.classList.add("drawn");
    }
  }
  return card;
}
const cards = {
  made: new Map(),
  get(id) {
    let card = this.made.get(id);
    if (!card && parents.has(id)) {
      card = rendered(cardOf(byId.get(id), labels.get(id), changes.get(id)));
      this.made.set(id, card);
    }
    return card;
  },
};
const BEFORE = 200, AFTER = 100, STEP = 200;  // cards put in the window at a time
const box = document.querySelector("main > div.entries");
const earlier = document.createElement("button"), later = document.createElement("button");
earlier.type = later.type = "button";
earlier.className = later.className = "more";
let list = [], from = 0, to = 0;  // the ids shown, in order; the window [from, to) of them
function mark() {
  earlier.hidden = from === 0;
  earlier.textContent = `▲ ${from} earlier entries`;
  later.hidden = to >= list.length;
  later.textContent = `▼ ${list.length - to} later entries`;
}
function cardsOf(start, end) {
  const shown = document.createDocumentFragment();
  for (let i = start; i < end; i++) { const card = cards.get(list[i]); if (card) shown.append(card); }
  return shown;
}
function render(ids, focus) {
  list = ids;
  const at = Math.max(0, list.indexOf(focus));
  from = Math.max(0, at - BEFORE);
  to = Math.min(list.length, at + AFTER);
  box.replaceChildren(earlier, cardsOf(from, to), later);
  mark();
}
function grow(up) {
  if (up && from > 0) {
    const start = Math.max(0, from - STEP);
    earlier.after(cardsOf(start, from));  // the browser keeps what is in view where it is
    from = start;
  } else if (!up && to < list.length) {
    const end = Math.min(list.length, to + STEP);
    later.before(cardsOf(to, end));
    to = end;
  }
  mark();
}
const watcher = new IntersectionObserver((seen) => {
  for (const end of seen) {
    if (!end.isIntersecting || end.target.hidden) continue;
    grow(end.target === earlier);
    watcher.unobserve(end.target);  // looked at afresh: still in view, it grows again
    watcher.observe(end.target);
  }
});
watcher.observe(earlier);
watcher.observe(later);
earlier.addEventListener("click", () => grow(true));
later.addEventListener("click", () => grow(false));

function show(id) {
  const path = pathTo(tipPath.has(id) ? tip : newestBelow(id));
  branch = new Set(path);
  selected = id;
  render(path, id);
  unfoldTo(id);
  rowIntoView(id);
  draw();
  cards.get(id)?.scrollIntoView({block: "nearest"});
}
document.querySelector("nav").addEventListener("click", (event) => {
  const fold = event.target.closest("button.fold");
  if (fold) { const at = Number(fold.dataset.at); setFold(at, !unfolded.has(at)); return; }
  const link = event.target.closest("a[data-id]");
  if (!link) return;
  event.preventDefault();
  history.replaceState(null, "", "#" + encodeURIComponent(link.dataset.id));
  show(link.dataset.id);
});
function fromHash() {
  try { return decodeURIComponent(location.hash.slice(1)); } catch { return ""; }
}
// The search index: [id, the card's words lower-cased], built a slice at a time while the
// page is idle after it is drawn (at 100k entries, 100-200 ms of work the first keystroke
// would otherwise pay); a search before it is done finishes it first.
const texts = [];
function index(idle) {
  while (texts.length < order.length && (!idle || idle.timeRemaining() > 1)) {
    for (const end = Math.min(order.length, texts.length + 500); texts.length < end;) {
      const id = order[texts.length];
      texts.push([id, textOf(byId.get(id), labels.get(id), changes.get(id)).toLowerCase()]);
    }
  }
  if (idle && texts.length < order.length) requestIdleCallback(index);
}
let last = null;  // the last search: its words, and where in `texts` they were found
document.querySelector("input#search").addEventListener("input", (event) => {
  const words = event.target.value.trim().toLowerCase();
  if (!words) {  // back to the branch
    last = null;
    found = new Set();
    const id = fromHash();
    show(parents.has(id) ? id : tip);
    return;
  }
  index(null);
  // Typing on narrows the last search: what holds the new words held the old ones, so only
  // the last matches are looked in (a text-heavy 100k session: 200 MB of words to scan).
  const within = last && words.includes(last.words) ? last.at : texts.keys();
  const at = [];
  for (const i of within) if (texts[i][1].includes(words)) at.push(i);
  last = {words, at};
  const matches = at.map((i) => texts[i][0]);
  found = new Set(matches);
  render(matches, matches[0]);
  draw();
});
relist();
window.mulliganSessionText = async () => decoded(await sessionBytes());
document.querySelector("button#download").addEventListener("click", async () => {
  const blob = new Blob([await sessionBytes()], {type: "application/x-ndjson"});
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = document.querySelector("script#session-jsonl").dataset.name;
  link.click();
});
show(parents.has(fromHash()) ? fromHash() : tip);
// For a program driving the page (the tests, bench/html_bench.py): ready, and its moves;
// `card` and `row` make any entry's card and tree row as the page shows them, `ids` lists
// the entries shown.
window.mulligan = {show, unfoldTo, rowIntoView, draw, ids: () => [...order],
                   card: (id) => cards.get(id), row: (id) => rowElement(links.get(id))};
document.body.dataset.ready = "true";
requestIdleCallback(index);
