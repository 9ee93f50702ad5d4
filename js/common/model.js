// A stand-in for an anywidget model (get / set / on / off / save_changes / send), so
// the same views render outside a kernel: in a shared report page, and in the
// JupyterLab panels that read the server's JSON API.
export class LocalModel {
  constructor(state = {}, { onSend = null, onSave = null } = {}) {
    this.state = { ...state };
    this.handlers = new Map();
    this.onSend = onSend;
    this.onSave = onSave;
  }
  get(name) { return this.state[name]; }
  set(name, value) {
    if (this.state[name] === value) return;
    this.state[name] = value;
    this.trigger(`change:${name}`);
  }
  /** Set several traits, then notify (one render for a whole poll). */
  update(values) {
    const changed = [];
    for (const [k, v] of Object.entries(values)) {
      if (JSON.stringify(this.state[k]) === JSON.stringify(v)) continue;
      this.state[k] = v;
      changed.push(k);
    }
    for (const k of changed) this.trigger(`change:${k}`);
    return changed.length > 0;
  }
  on(event, cb) {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event).add(cb);
  }
  off(event, cb) {
    if (!event) { this.handlers.clear(); return; }
    if (!cb) this.handlers.delete(event);
    else this.handlers.get(event)?.delete(cb);
  }
  trigger(event, ...args) {
    for (const cb of [...(this.handlers.get(event) || [])]) cb(...args);
  }
  save_changes() { this.onSave?.(this); }
  send(msg) { this.onSend?.(msg, this); }
}
