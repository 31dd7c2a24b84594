// The event loop's turn, as a number that changes once the loop has moved on (a setImmediate,
// armed only when someone asked): a socket's frame budget is per turn (inflow.ts).
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
