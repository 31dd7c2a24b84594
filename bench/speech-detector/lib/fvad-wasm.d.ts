// Types for @echogarden/fvad-wasm (libfvad, the WebRTC VAD, compiled by Emscripten), which ships none.
declare module '@echogarden/fvad-wasm' {
  export interface FvadModule {
    HEAP16: Int16Array;
    _fvad_new(): number;
    _fvad_free(handle: number): void;
    _fvad_reset(handle: number): void;
    _fvad_set_mode(handle: number, mode: number): number;
    _fvad_set_sample_rate(handle: number, rate: number): number;
    /** 1 speech, 0 not, -1 a bad frame length. */
    _fvad_process(handle: number, frame: number, samples: number): number;
    _malloc(bytes: number): number;
    _free(pointer: number): void;
  }
  const createFvad: () => Promise<FvadModule>;
  export default createFvad;
}
