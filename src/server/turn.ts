// The event loop's turn, as a number that changes once the loop has moved on (a setImmediate,
// armed only when someone asked). Two things here depend on it: whether uWS's own callback for a
// request is still on the stack (its cork still holds), and a socket's frame budget per turn.
let turn = 0;
let armed = false;
const advance = () => {
  turn++;
  armed = false;
};

/** The current turn; a later call returns another number once the loop has been through its check phase. */
export function loopTurn(): number {
  if (!armed) {
    armed = true;
    setImmediate(advance);
  }
  return turn;
}
