// Fails when the import graph of src/, bench/ and scripts/ has a cycle.
// Type-only imports count: a cycle of types is still two modules that cannot
// be understood one without the other. Each cycle is printed as its modules.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");

function sources(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...sources(path));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) found.push(path);
  }
  return found;
}

const files = ["src", "bench", "scripts"].flatMap((dir) => sources(join(root, dir)));
const graph = new Map();
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  const local = importedFiles.map((i) => i.fileName).filter((name) => name.startsWith("."));
  graph.set(file, local.map((name) => resolve(dirname(file), name.replace(/\.js$/, ".ts"))).filter((path) => path !== file));
}

// Tarjan's strongly connected components: every component of more than one module is a cycle.
let counter = 0;
const index = new Map();
const low = new Map();
const stack = [];
const onStack = new Set();
const cycles = [];
function visit(node) {
  index.set(node, counter);
  low.set(node, counter);
  counter++;
  stack.push(node);
  onStack.add(node);
  for (const next of graph.get(node) ?? []) {
    if (!graph.has(next)) continue;
    if (!index.has(next)) {
      visit(next);
      low.set(node, Math.min(low.get(node), low.get(next)));
    } else if (onStack.has(next)) low.set(node, Math.min(low.get(node), index.get(next)));
  }
  if (low.get(node) !== index.get(node)) return;
  const component = [];
  let member;
  do {
    member = stack.pop();
    onStack.delete(member);
    component.push(member);
  } while (member !== node);
  if (component.length > 1) cycles.push(component.map((path) => relative(root, path)).sort());
}
for (const node of graph.keys()) if (!index.has(node)) visit(node);

if (cycles.length > 0) {
  for (const cycle of cycles) console.error(`import cycle: ${cycle.join(" <-> ")}`);
  process.exit(1);
}
console.log(`no import cycles in ${graph.size} modules`);
