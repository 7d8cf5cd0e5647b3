// What the scan and wallet panels' forms share: a list parsed from a text area, and a
// start height.

/**
 * The form's list (`parse` returns a sentence when the text is wrong) and its start
 * height; null after showing what is wrong and focusing the field to fix.
 */
export function readForm<T>(
  list: HTMLTextAreaElement,
  parse: (text: string) => T | string,
  from: HTMLInputElement,
  showError: (text: string) => void,
): { items: T; from: number } | null {
  const items = parse(list.value);
  if (typeof items === 'string') {
    showError(items);
    list.focus();
    return null;
  }
  const height = Number(from.value || 0);
  if (!Number.isInteger(height) || height < 0) {
    showError('The start height is a whole number, 0 or more.');
    from.focus();
    return null;
  }
  return { items, from: height };
}
