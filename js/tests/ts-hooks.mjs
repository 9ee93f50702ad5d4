// Module hooks for the tests (registered by register.mjs): a .ts file is turned into
// JavaScript by esbuild, as js/build.mjs does; type errors are tsc's (npm run check).
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";

export async function resolve(specifier, context, next) {
  // The sources import each other as "./dom.js" (what the bundler resolves to dom.ts).
  if (context.parentURL?.endsWith(".ts") && /^\.\.?\/.*\.js$/.test(specifier)) {
    const ts = new URL(specifier.replace(/\.js$/, ".ts"), context.parentURL);
    if (existsSync(fileURLToPath(ts))) return { url: ts.href, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.startsWith("file:") && url.endsWith(".ts")) {
    const path = fileURLToPath(url);
    const { code } = transformSync(readFileSync(path, "utf8"), {
      loader: "ts",
      format: "esm",
      target: "es2022",
      sourcefile: path,
      sourcemap: "inline",
    });
    return { format: "module", source: code, shortCircuit: true };
  }
  // The bundler takes a plain `import rules from "x.json"` (js/lab/polling.ts); node
  // would want an import attribute.
  if (url.startsWith("file:") && url.endsWith(".json")) {
    const json = readFileSync(fileURLToPath(url), "utf8");
    return { format: "module", source: `export default ${json};`, shortCircuit: true };
  }
  return next(url, context);
}
