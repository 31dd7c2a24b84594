// Items a pipeline holds back, with their total bytes: its first chunks until the container is
// known, and the parsed units until the stream's headers decide its route.

export class Backlog<T> {
  private list: T[] = [];
  private total = 0;

  constructor(private size: (item: T) => number) {}

  get items(): readonly T[] {
    return this.list;
  }

  get bytes(): number {
    return this.total;
  }

  push(item: T): void {
    this.list.push(item);
    this.total += this.size(item);
  }

  /** Empties the backlog; returns what it held. */
  take(): T[] {
    const list = this.list;
    this.list = [];
    this.total = 0;
    return list;
  }
}
