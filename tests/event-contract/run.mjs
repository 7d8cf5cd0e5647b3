// The event contract between the engine (Rust) and the package (TypeScript), checked.
//
// Every event the engine sends is in one table, crates/client/src/events.rs, which the wasm
// shell builds its event objects from (a property the table does not list fails to
// compile). This compares that table with the `LightwireEvent` union of pkg/src/types.ts,
// read with the TypeScript compiler's own checker (interfaces, `extends`, intersections
// and nested unions resolved as tsc resolves them):
//   - each event of the table is one member of the union, with the same `type` (and, for
//     a type with several shapes, the same variant: `status` of `transaction`), and the
//     same properties, none of them optional (the engine always sets every one);
//   - each member of the union is an event of the table, or one the TypeScript layer
//     dispatches itself (TYPESCRIPT_ONLY below).
// Each difference is printed, and the check fails. Then it checks itself: a table with a
// property dropped, one added and an event left out must each be found.
//
//   node tests/event-contract/run.mjs      (prints the table with
//                                           `cargo run -q -p lightwire --example event_contract`)

import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const TYPES = join(root, 'pkg', 'src', 'types.ts');
const UNION = 'LightwireEvent';

/// Members of the union that the engine does not send: the TypeScript layer dispatches them.
const TYPESCRIPT_ONLY = {
  persistence: 'pkg/src/index.ts: the browser\'s answer to navigator.storage.persist()',
  workerRestarted: 'pkg/src/supervisor.ts: the page\'s watchdog restarted a hung worker',
  role: 'pkg/src/tabs.ts: whether this tab runs the engine or follows the one that does',
};

function log(msg) {
  console.log(`[event-contract] ${msg}`);
}

/// The engine's table: [{ type, variant: [property, value] | null, fields: [names] }].
function rustTable() {
  const out = execFileSync(
    'cargo',
    ['run', '-q', '-p', 'lightwire', '--example', 'event_contract'],
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return JSON.parse(out);
}

/// The key an event is matched by: its type, and its variant if it has one.
function key(type, variant) {
  return variant ? `${type} (${variant[0]}: ${variant[1]})` : type;
}

/// The members of the union in `file`: [{ type, literals, fields, optional }], where
/// `literals` maps each other property whose type is one string literal to that literal
/// (the candidates for a variant).
function typescriptUnion(file) {
  const config = ts.readConfigFile(join(root, 'pkg', 'tsconfig.json'), ts.sys.readFile);
  if (config.error) {
    throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  }
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, join(root, 'pkg'));
  const program = ts.createProgram([file], { ...options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const alias = source.statements.find(
    (s) => ts.isTypeAliasDeclaration(s) && s.name.text === UNION,
  );
  if (!alias) {
    throw new Error(`${file} declares no type ${UNION}`);
  }
  const union = checker.getTypeAtLocation(alias.name);
  const members = union.isUnion() ? union.types : [union];
  return members.map((t) => {
    const props = checker.getPropertiesOfType(t);
    const literal = (p) => {
      const pt = checker.getTypeOfSymbolAtLocation(p, alias);
      return pt.isStringLiteral() ? pt.value : null;
    };
    const typeProp = props.find((p) => p.name === 'type');
    const type = typeProp ? literal(typeProp) : null;
    if (type === null) {
      throw new Error(`a member of ${UNION} (${checker.typeToString(t)}) has no literal \`type\``);
    }
    const literals = {};
    for (const p of props) {
      if (p.name !== 'type' && literal(p) !== null) {
        literals[p.name] = literal(p);
      }
    }
    return {
      type,
      literals,
      fields: props.map((p) => p.name).filter((n) => n !== 'type'),
      optional: props.filter((p) => p.flags & ts.SymbolFlags.Optional).map((p) => p.name),
    };
  });
}

/// Every difference between the engine's table and the union's members, as sentences.
function compare(table, members) {
  const problems = [];
  // Which property tells apart the shapes of each type, as the table says.
  const variantOf = new Map(table.filter((e) => e.variant).map((e) => [e.type, e.variant[0]]));
  const declared = new Map();
  for (const m of members) {
    const by = variantOf.get(m.type);
    const variant = by && by in m.literals ? [by, m.literals[by]] : null;
    const k = key(m.type, variant);
    if (declared.has(k)) {
      problems.push(`${UNION} has two members for ${k}`);
    }
    declared.set(k, { ...m, fields: m.fields.filter((f) => !variant || f !== variant[0]) });
  }
  const sent = new Set();
  for (const e of table) {
    const k = key(e.type, e.variant);
    sent.add(k);
    const m = declared.get(k);
    if (!m) {
      problems.push(`the engine sends ${k}, which ${UNION} lacks`);
      continue;
    }
    const missing = e.fields.filter((f) => !m.fields.includes(f));
    const extra = m.fields.filter((f) => !e.fields.includes(f));
    if (missing.length > 0) {
      problems.push(`${k}: the engine sets ${missing.join(', ')}, which types.ts does not declare`);
    }
    if (extra.length > 0) {
      problems.push(`${k}: types.ts declares ${extra.join(', ')}, which the engine does not set`);
    }
    if (m.optional.length > 0) {
      problems.push(`${k}: types.ts makes ${m.optional.join(', ')} optional; the engine always sets them`);
    }
  }
  for (const k of declared.keys()) {
    if (!sent.has(k) && !(k in TYPESCRIPT_ONLY)) {
      problems.push(`${UNION} has ${k}, which the engine does not send (nor the TypeScript layer, by TYPESCRIPT_ONLY)`);
    }
  }
  for (const k of Object.keys(TYPESCRIPT_ONLY)) {
    if (!declared.has(k)) {
      problems.push(`TYPESCRIPT_ONLY names ${k}, which ${UNION} lacks`);
    }
  }
  return problems;
}

/// The comparison finds a property dropped, a property added and an event left out.
function checkTheCheck(table, members) {
  const copy = () => table.map((e) => ({ ...e, fields: [...e.fields] }));
  const dropped = copy();
  dropped[0].fields.pop();
  const added = copy();
  added[0].fields.push('notDeclared');
  const short = copy().slice(1);
  for (const [what, t] of [['a dropped property', dropped], ['an added property', added], ['an event left out', short]]) {
    if (compare(t, members).length === 0) {
      throw new Error(`the check does not see ${what}`);
    }
  }
}

const table = rustTable();
const members = typescriptUnion(TYPES);
log(`${table.length} events in the engine's table, ${members.length} members of ${UNION}`);
const problems = compare(table, members);
if (problems.length > 0) {
  for (const p of problems) {
    console.error(`[event-contract] ${p}`);
  }
  console.error(`[event-contract] FAILED: crates/client/src/events.rs and pkg/src/types.ts differ (${problems.length})`);
  process.exit(1);
}
checkTheCheck(table, members);
log('the engine and pkg/src/types.ts agree on every event');
