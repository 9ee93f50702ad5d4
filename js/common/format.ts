// Number, time and size formatting shared by every view.
import { now } from "./clock.js";

/** A figure as the store sends it: null (or absent) where it was not recorded. */
type Figure = number | null | undefined;

export function duration(s: Figure): string {
  if (s == null || !isFinite(s)) return "–";
  if (s < 0) s = 0;
  if (s < 1e-3) return s === 0 ? "0 s" : `${Math.round(s * 1e6)} µs`;
  if (s < 1) return `${Math.round(s * 1e3)} ms`;
  if (s < 10) return `${s.toFixed(2)} s`;
  if (s < 59.95) return `${s.toFixed(1)} s`;
  // Round once, then split: 239.6 s is "4m 00s", never "3m 60s".
  const whole_s = Math.round(s);
  const m = Math.floor(whole_s / 60);
  if (m < 60) return `${m}m ${String(whole_s % 60).padStart(2, "0")}s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

export function bytes(n: Figure): string {
  if (n == null || !isFinite(n)) return "–";
  const units = ["B", "kiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${units[i]}`;
}

export function count(n: Figure): string {
  if (n == null || !isFinite(n)) return "–";
  if (Math.abs(n) < 1e4) return String(Math.round(n));
  if (Math.abs(n) < 1e6) return `${(n / 1e3).toFixed(n < 1e5 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1)}M`;
}

/** Every digit, grouped: "12,345" (exact counts, where count() would say "12.3k"). */
export function whole(n: Figure): string {
  if (n == null || !isFinite(n)) return "–";
  return Number(n).toLocaleString("en-US");
}

export function percent(x: Figure): string {
  if (x == null || !isFinite(x)) return "–";
  return x < 0.1 && x > 0 ? "<0.1%" : `${x.toFixed(x < 10 ? 1 : 0)}%`;
}

export function money(x: Figure): string {
  if (x == null || !isFinite(x)) return "–";
  return x < 0.01 && x > 0 ? `$${x.toFixed(4)}` : `$${x.toFixed(2)}`;
}

export function clock(t: Figure): string {
  if (!t) return "–";
  const d = new Date(t * 1000);
  const now = new Date();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  if (d.toDateString() === now.toDateString()) return time;
  return `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}

/** A full local date and time, "2026-11-23 14:05:09", as the CLI prints it. */
export function datetime(t: Figure): string {
  if (!t) return "–";
  const d = new Date(t * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** "5m 02s ago", against the views' clock (a report's moment, in a report). */
export function ago(t: Figure): string {
  if (!t) return "–";
  const s = now() - t;
  if (s < 5) return "just now";
  return `${duration(s).replace(/\.\d+ s$/, " s")} ago`;
}

/** "tcp://127.0.0.1:34567" -> "127.0.0.1:34567"; long ids shortened in the middle. */
export function short(text: string | number | null | undefined, max = 32): string {
  if (!text) return "";
  text = String(text).replace(/^\w+:\/\//, "");
  if (text.length <= max) return text;
  const half = Math.floor((max - 1) / 2);
  return `${text.slice(0, half)}…${text.slice(-half)}`;
}
