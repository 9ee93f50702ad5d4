// Just enough of a DOM for the helpers that build elements (js/common/dom.ts h) to run in
// node: elements with attributes, classes, dataset, style, children, listeners and focus.
// Layout, CSS and real events are the browser tests' (tests/*_browser.py).

class FakeNode extends EventTarget {
  constructor() {
    super();
    this.parentNode = null;
    this.childNodes = [];
  }
  get firstChild() {
    return this.childNodes[0] ?? null;
  }
  get textContent() {
    return this.childNodes.map((c) => c.textContent).join("");
  }
  append(...nodes) {
    for (const n of nodes) {
      const node = n instanceof FakeNode ? n : new FakeText(String(n));
      node.parentNode = this;
      this.childNodes.push(node);
    }
  }
  removeChild(node) {
    this.childNodes = this.childNodes.filter((c) => c !== node);
    node.parentNode = null;
    return node;
  }
  contains(node) {
    for (let n = node; n; n = n.parentNode) if (n === this) return true;
    return false;
  }
}

class FakeText extends FakeNode {
  constructor(text) {
    super();
    this.text = text;
  }
  get textContent() {
    return this.text;
  }
}

class FakeElement extends FakeNode {
  constructor(doc, tag) {
    super();
    this.ownerDocument = doc;
    this.tagName = tag.toUpperCase();
    this.attributes = new Map();
    this.dataset = {};
    this.style = {};
    this.className = "";
  }
  setAttribute(name, value) {
    this.attributes.set(name, String(value));
  }
  getAttribute(name) {
    return this.attributes.get(name) ?? null;
  }
  get tabIndex() {
    return Number(this.getAttribute("tabindex") ?? -1);
  }
  set tabIndex(v) {
    this.setAttribute("tabindex", v);
  }
  focus() {
    this.ownerDocument.activeElement = this;
  }
  click() {
    this.dispatchEvent(new Event("click"));
  }
  /** Descendants, depth first; only `[data-x]` selectors, which is what the helpers use. */
  querySelectorAll(selector) {
    const m = /^\[data-([a-z]+)\]$/.exec(selector);
    if (!m) throw new Error(`fake-dom: selector ${selector} not supported`);
    const out = [];
    const walk = (el) => {
      for (const c of el.childNodes) {
        if (!(c instanceof FakeElement)) continue;
        if (m[1] in c.dataset) out.push(c);
        walk(c);
      }
    };
    walk(this);
    return out;
  }
}

/** Installs document, Node and HTMLElement as globals; returns the document. */
export function installDom() {
  const doc = {
    activeElement: null,
    createElement: (tag) => new FakeElement(doc, tag),
  };
  globalThis.document = doc;
  globalThis.Node = FakeNode;
  globalThis.HTMLElement = FakeElement;
  return doc;
}

/** A keydown as a browser sends it: cancelable, with its key. */
export function keydown(key) {
  return Object.assign(new Event("keydown", { cancelable: true }), { key });
}
