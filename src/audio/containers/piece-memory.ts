// The memory of client pieces, freed as soon as nothing needs it. A piece lives a second or two (the
// replay keeps its audio until a final transcript covers it), so V8 promotes it and frees it only at
// a major collection, which external memory starts only after about 64 MB more: the pieces of every
// session piled up in between, several times the audio the replays hold. Memory is freed here by
// detaching its ArrayBuffer, which V8 frees at once; only memory made here for one piece (no pool, no
// memory another part of the process shares) is ever detached, and only when its caller knows that
// nothing reads it any more. Where the runtime cannot detach (Node before 22), memory waits for V8.

/** Memory made here, each holding one client piece or a join of pieces: the only memory freed. */
const owned = new WeakSet<ArrayBufferLike>();

type Detachable = ArrayBuffer & { transfer?(length: number): ArrayBuffer };
const canDetach = typeof (ArrayBuffer.prototype as Detachable).transfer === 'function';

/** `bytes` bytes of memory of their own (never a pool a kept piece would pin), freeable once unread. */
export function pieceMemory(bytes: number): Buffer {
  const b = Buffer.allocUnsafeSlow(bytes);
  if (canDetach) owned.add(b.buffer);
  return b;
}

/** Frees memory made by pieceMemory; the caller has made sure that nothing reads it any more (every
 *  view of it would read as empty). Other memory is left to the collector. */
export function freePiece(memory: ArrayBufferLike): boolean {
  if (!owned.delete(memory)) return false;
  (memory as Detachable).transfer!(0);
  return true;
}
