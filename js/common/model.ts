// A stand-in for an anywidget model (get / set / on / off / save_changes / send), so
// the same views render outside a kernel: in a shared report page, and in the
// JupyterLab panels that read the server's JSON API.
// Each event passes its own arguments (a custom message: the message and its buffers).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a handler types what its event sends
type Handler = (...args: any[]) => void;

/** What a view needs of its model: anywidget's model, or a LocalModel. */
export interface Model {
  // A trait is whatever the kernel or the server's API sent: the view that reads it says
  // what it expects (the row types of rows.ts), as anywidget's own model leaves it to it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
  get(name: string): any;
  set(name: string, value: unknown): void;
  on(event: string, cb: Handler): void;
  off(event?: string | null, cb?: Handler | null): void;
  save_changes(): void;
  send(msg: unknown, ...rest: unknown[]): void;
}

/** The anywidget render() argument. */
export interface RenderProps {
  model: Model;
  el: HTMLElement;
}

/** An anywidget view module's default export: render returns its cleanup. */
export interface View {
  render(props: RenderProps): void | (() => void);
}

export class LocalModel implements Model {
  state: Record<string, unknown>;
  handlers: Map<string, Set<Handler>>;
  onSend: ((msg: unknown, model: LocalModel) => void) | null;
  onSave: ((model: LocalModel) => void) | null;

  constructor(
    state: Record<string, unknown> = {},
    {
      onSend = null,
      onSave = null,
    }: {
      onSend?: ((msg: unknown, model: LocalModel) => void) | null;
      onSave?: ((model: LocalModel) => void) | null;
    } = {},
  ) {
    this.state = { ...state };
    this.handlers = new Map();
    this.onSend = onSend;
    this.onSave = onSave;
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as Model.get
  get(name: string): any {
    return this.state[name];
  }
  set(name: string, value: unknown): void {
    if (this.state[name] === value) return;
    this.state[name] = value;
    this.trigger(`change:${name}`);
  }
  /** Set several traits, then notify (one render for a whole poll). */
  update(values: Record<string, unknown>): boolean {
    const changed: string[] = [];
    for (const [k, v] of Object.entries(values)) {
      if (JSON.stringify(this.state[k]) === JSON.stringify(v)) continue;
      this.state[k] = v;
      changed.push(k);
    }
    for (const k of changed) this.trigger(`change:${k}`);
    return changed.length > 0;
  }
  on(event: string, cb: Handler): void {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event)!.add(cb);
  }
  off(event?: string | null, cb?: Handler | null): void {
    if (!event) {
      this.handlers.clear();
      return;
    }
    if (!cb) this.handlers.delete(event);
    else this.handlers.get(event)?.delete(cb);
  }
  trigger(event: string, ...args: unknown[]): void {
    for (const cb of [...(this.handlers.get(event) || [])]) cb(...args);
  }
  save_changes(): void {
    this.onSave?.(this);
  }
  send(msg: unknown): void {
    this.onSend?.(msg, this);
  }
}
