/** `1 file`, `3 files`: a count and its noun (`many`: an irregular plural). */
export const plural = (count: number, noun: string, many = `${noun}s`): string =>
  `${count} ${count === 1 ? noun : many}`
