// ESLint for the browser code in js/ (`npm run lint`, `scripts/dev lint`): the recommended
// JavaScript and typescript-eslint rules.  Type-checking itself is tsc's (`npm run check`).
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
  // Built outputs: bundles and the Lab extension (see js/build.mjs).
  { ignores: ["js/lib/", "dask_analytics_lab/static/", "dask_analytics_lab/labextension/"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  { files: ["js/**/*.ts"], languageOptions: { globals: globals.browser } },
  { files: ["js/**/*.mjs", "*.mjs"], languageOptions: { globals: globals.node } },
);
