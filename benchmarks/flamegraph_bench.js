// Renders a synthetic 10,000-node Dask profile with the flamegraph view and reports
// how long it takes (flatten + layout + canvas draw).  Loaded by flamegraph_bench.py.
import { FlameChart } from "/dask_analytics_lab/static/flamegraph.js";

/** A profile tree shaped like Dask's: deep call stacks, heavy on the left. */
export function makeProfile(nodes, seed = 42) {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648);
  const node = (name, depth) => ({
    count: 0, identifier: `${name};${depth}`, children: {},
    description: { filename: `/site-packages/pkg${depth % 7}/module${Math.floor(rand() * 50)}.py`, name, line_number: Math.floor(rand() * 900), line: `    result = ${name}(data, axis=${depth})` },
  });
  const root = node("root", 0);
  root.description = { filename: "", name: "", line_number: 0, line: "" };
  const all = [[root, 0]];
  let made = 1;
  while (made < nodes) {
    // Attach to a recent node more often: long stacks, as real profiles have.
    const [parent, depth] = all[Math.floor(all.length - 1 - Math.floor(rand() * rand() * all.length))];
    if (depth > 40) continue;
    const child = node(`fn_${made}`, depth + 1);
    parent.children[child.identifier + made] = child;
    all.push([child, depth + 1]);
    made++;
  }
  // Counts: leaves get samples, parents sum their children.
  const sum = (n) => {
    const kids = Object.values(n.children);
    n.count = kids.length ? kids.reduce((a, k) => a + sum(k), 0) + Math.floor(rand() * 3) : 1 + Math.floor(rand() * 20);
    return n.count;
  };
  sum(root);
  return root;
}

export function run(nodes = 10_000, repeats = 10) {
  const tree = makeProfile(nodes);
  const holder = document.createElement("div");
  holder.style.width = "1200px";
  document.body.append(holder);
  const times = [];
  for (let i = 0; i < repeats; i++) {
    const chart = new FlameChart(holder);
    const t0 = performance.now();
    chart.setTree(tree);
    const t1 = performance.now();
    times.push(t1 - t0);
    if (i < repeats - 1) { chart.dispose(); holder.innerHTML = ""; }
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { nodes, first_ms: times[0], median_ms: sorted[Math.floor(sorted.length / 2)], max_ms: sorted[sorted.length - 1] };
}
