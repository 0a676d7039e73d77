/* The judging page's script (pipeline/judging/page.py writes it into the page): one
   (query paper, candidate) pair at a time, graded with keys 0-3, undone with u or Backspace,
   the labels kept in localStorage under the page's digest (a reload resumes) and downloaded
   with d as the TSV that `make judge JUDGE=file:<labels.tsv>` reads. Every paper's text is set
   as text (textContent), never as HTML. */
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("judging-data").textContent);
  const pairs = data.pairs;  // [query id, candidate id], in the page's order
  const key = "mdcr-judging:" + data.digest;
  const $ = (id) => document.getElementById(id);
  const querying = data.query_texts ? "query" : "query paper";
  let stored = true;  // whether localStorage keeps the labels
  let state = load();

  function load() {
    let found = null;
    try {
      found = JSON.parse(window.localStorage.getItem(key));
    } catch (error) {
      stored = false;
    }
    const fresh = {assessor: "", labels: []};
    if (!found || typeof found !== "object" || !Array.isArray(found.labels)) {
      return fresh;
    }
    // labels are given in the page's order: keep those that still match its pairs
    const labels = [];
    for (const label of found.labels) {
      const pair = pairs[labels.length];
      if (!pair || !label || label.q !== pair[0] || label.d !== pair[1]
          || ![0, 1, 2, 3].includes(label.grade) || typeof label.time !== "string") {
        break;
      }
      labels.push(label);
    }
    return {assessor: typeof found.assessor === "string" ? found.assessor : "", labels: labels};
  }

  function save() {
    try {
      window.localStorage.setItem(key, JSON.stringify(state));
      stored = true;
    } catch (error) {
      stored = false;
    }
    $("storage").hidden = stored;
  }

  function now() {  // UTC to the second, as the LLM assessor records its judgments
    return new Date().toISOString().replace(/\.\d+Z$/, "Z");
  }

  function text(id, value) {
    const missing = value === null || value === undefined || value === "";
    $(id).textContent = missing ? data.missing : value;
    $(id).classList.toggle("missing", missing);
  }

  function say(message) {
    $("status").textContent = message;
  }

  function render() {
    const n = state.labels.length;
    $("progress").textContent = n + " of " + pairs.length + " judged";
    $("bar").max = pairs.length;
    $("bar").value = n;
    const done = n >= pairs.length;
    $("done").hidden = !done;
    $("candidate").hidden = done;
    const pair = pairs[Math.min(n, pairs.length - 1)];
    // a collection's queries carry their own text (no papers of the corpus): kept apart
    const query = (data.query_texts || data.papers)[pair[0]];
    const doc = data.papers[pair[1]];
    const place = data.places[Math.min(n, pairs.length - 1)];
    $("query-place").textContent = "(" + place[0] + " of " + data.queries + ")";
    $("candidate-place").textContent = "(" + place[1] + " of " + place[2]
      + " for this " + querying + ")";
    text("query-id", pair[0]);
    text("query-title", query[0]);
    text("query-abstract", query[1]);
    text("candidate-id", pair[1]);
    text("candidate-title", doc[0]);
    text("candidate-abstract", doc[1]);
  }

  function grade(value) {
    if (state.labels.length >= pairs.length) {
      say("Every pair is judged: undo (u) to change the last grade.");
      return;
    }
    const pair = pairs[state.labels.length];
    state.labels.push({q: pair[0], d: pair[1], grade: value, time: now()});
    save();
    say("Graded " + value + ": candidate " + pair[1] + " for " + querying + " " + pair[0]
        + ".");
    render();
  }

  function undo() {
    const label = state.labels.pop();
    if (!label) {
      say("Nothing to undo.");
      return;
    }
    save();
    say("Undone: grade " + label.grade + " of candidate " + label.d + " for " + querying + " "
        + label.q + ".");
    render();
  }

  function tsv() {
    const clean = (value) => String(value).replace(/[\t\r\n]+/g, " ").trim();
    return data.header.join("\t") + "\n" + state.labels.map((label) => [
      label.q, label.d, label.grade, clean(state.assessor), label.time].join("\t") + "\n"
    ).join("");
  }

  function download() {
    if (!state.labels.length) {
      say("No labels yet: grade a pair first (keys 0 to 3).");
      return;
    }
    if (!state.assessor) {  // asked once, then kept with the labels
      $("name-form").hidden = false;
      $("name").focus();
      return;
    }
    const url = URL.createObjectURL(new Blob([tsv()], {type: "text/tab-separated-values"}));
    const link = document.createElement("a");
    link.href = url;
    link.download = data.file;
    document.body.appendChild(link);
    link.click();
    link.remove();
    window.setTimeout(() => URL.revokeObjectURL(url), 60000);
    say("Downloaded " + state.labels.length + " labels as " + data.file + ".");
  }

  $("name-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("name").value.replace(/[\t\r\n]+/g, " ").trim();
    if (!name) {
      say("Give your name: it is recorded as the labels' assessor.");
      return;
    }
    state.assessor = name;
    save();
    $("name-form").hidden = true;
    $("name").blur();
    download();
  });
  $("name-cancel").addEventListener("click", () => {
    $("name-form").hidden = true;
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) {
      return;
    }
    const target = event.target;
    if (target && target.closest && target.closest("input, textarea, select, form")) {
      if (event.key === "Escape") {
        $("name-form").hidden = true;
      }
      return;  // typing a name
    }
    if (/^[0-3]$/.test(event.key)) {
      grade(Number(event.key));
    } else if (event.key === "u" || event.key === "U" || event.key === "Backspace") {
      undo();
    } else if (event.key === "d" || event.key === "D") {
      download();
    } else {
      return;
    }
    event.preventDefault();
  });

  const list = $("grades");
  for (const [value, meaning] of data.grades) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = String(value);
    button.title = "grade " + value + " (key " + value + ")";
    button.dataset.grade = String(value);
    button.addEventListener("click", () => grade(value));
    const words = document.createElement("span");
    words.className = "meaning";
    words.textContent = meaning;
    item.append(button, words);
    list.appendChild(item);
  }
  $("undo").addEventListener("click", undo);
  $("download").addEventListener("click", download);
  $("digest").textContent = data.digest.slice(0, 12);
  $("query-kind").textContent = data.query_texts ? "Query" : "Query paper";
  save();
  render();
}());
