// `node --import ./js/tests/register.mjs --test ...` (npm test): the tests import js/'s
// TypeScript sources as they are, so what they test is what esbuild bundles, with no
// build step between an edit and its test.
import { register } from "node:module";

register("./ts-hooks.mjs", import.meta.url);
