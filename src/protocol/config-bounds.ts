// What any configuration may carry, known fields or not: nesting depth, array items, fields per object,
// string lengths, and its size as JSON. Unknown fields are forwarded (the upstream may know them), so
// this is what keeps them harmless: a config 5,000 levels deep would make JSON.stringify throw on the
// way upstream. The walk uses an explicit stack (recursion could overflow too) and stops at the first
// problem, so its work is bounded by the size limit, not by what the client sent.
import {
  MAX_CONFIG_BYTES,
  MAX_CONFIG_DEPTH,
  MAX_LIST_ITEMS,
  MAX_OBJECT_KEYS,
  MAX_STRING_CHARS,
} from './config-common.js';
import { formatPath } from './reasons.js';

interface Node {
  value: unknown;
  /** Containers between this value and the configuration itself (0 for the configuration). */
  depth: number;
  parent?: Node;
  key?: string | number;
}

function pathOf(node: Node): string {
  const path: Array<string | number> = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) path.push(n.key!);
  return formatPath('configuration', path.reverse());
}

const at = (node: Node, message: string) => `${pathOf(node)}: ${message}`;

/** UTF-8 bytes of a string as JSON writes it, quotes and escapes included. */
const jsonBytes = (s: string) => Buffer.byteLength(JSON.stringify(s));
const tooLong = (s: string) => `at most ${MAX_STRING_CHARS} characters (got ${s.length})`;

/** Pushes an object's fields (in order) onto `stack`; its own JSON bytes, or the limit it breaks. */
function visitObject(node: Node, value: object, stack: Node[]): number | string {
  const keys = Object.keys(value);
  if (keys.length > MAX_OBJECT_KEYS) return at(node, `at most ${MAX_OBJECT_KEYS} fields (got ${keys.length})`);
  let bytes = Math.max(2, 1 + 2 * keys.length); // braces, colons and commas
  for (let i = keys.length - 1; i >= 0; i--) {
    const child: Node = {
      value: (value as Record<string, unknown>)[keys[i]],
      depth: node.depth + 1,
      parent: node,
      key: keys[i],
    };
    if (keys[i].length > MAX_STRING_CHARS) return at(child, `field name ${tooLong(keys[i])}`);
    bytes += jsonBytes(keys[i]);
    stack.push(child);
  }
  return bytes;
}

/** Bytes `node` adds to the JSON text, its children pushed onto `stack`; or the limit it breaks. */
function visit(node: Node, stack: Node[]): number | string {
  const { value } = node;
  if (typeof value === 'string') return value.length > MAX_STRING_CHARS ? at(node, tooLong(value)) : jsonBytes(value);
  if (value === null || typeof value !== 'object') return String(value).length;
  if (node.depth > MAX_CONFIG_DEPTH) return at(node, `nested more than ${MAX_CONFIG_DEPTH} levels deep`);
  if (!Array.isArray(value)) return visitObject(node, value, stack);
  if (value.length > MAX_LIST_ITEMS) return at(node, `at most ${MAX_LIST_ITEMS} items (got ${value.length})`);
  for (let i = value.length - 1; i >= 0; i--)
    stack.push({ value: value[i], depth: node.depth + 1, parent: node, key: i });
  return Math.max(2, 1 + value.length); // brackets and commas
}

/** The first bound `configuration` breaks, as a reason naming the field and the limit; undefined when within bounds. */
export function configBoundsProblem(configuration: unknown): string | undefined {
  const stack: Node[] = [{ value: configuration, depth: 0 }];
  let bytes = 0;
  while (stack.length > 0) {
    const node = stack.pop()!;
    const added = visit(node, stack);
    if (typeof added === 'string') return added;
    bytes += added;
    if (bytes > MAX_CONFIG_BYTES)
      return `configuration: at most ${MAX_CONFIG_BYTES} bytes as JSON (passed at ${pathOf(node)})`;
  }
  return undefined;
}
