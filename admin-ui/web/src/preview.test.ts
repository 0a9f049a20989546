import { describe, expect, it } from 'vitest';
import { hasThumbnail, previewOf, THUMBNAIL_SOURCE_LIMIT } from './preview';

describe('previews', () => {
  it('know images, video, audio, PDF and text by extension', () => {
    expect(previewOf('Photo.JPG')).toEqual({ kind: 'image', type: 'image/jpeg' });
    expect(previewOf('clip.webm')?.kind).toBe('video');
    expect(previewOf('song.mp3')?.kind).toBe('audio');
    expect(previewOf('paper.pdf')).toEqual({ kind: 'pdf', type: 'application/pdf' });
    expect(previewOf('notes.md')).toEqual({ kind: 'text', type: 'text/plain' });
  });
  it('show HTML and SVG as text, never rendered', () => {
    expect(previewOf('page.html')).toEqual({ kind: 'text', type: 'text/plain' });
    expect(previewOf('logo.svg')).toEqual({ kind: 'text', type: 'text/plain' });
  });
  it('offer nothing for unknown types', () => {
    expect(previewOf('archive.zip')).toBeNull();
    expect(previewOf('README')).toBeNull();
  });
  it('ask for thumbnails of the image formats the gateway decodes, within its size bound', () => {
    expect(hasThumbnail('Photo.JPG', 1000)).toBe(true);
    expect(hasThumbnail('a.png', THUMBNAIL_SOURCE_LIMIT)).toBe(true);
    expect(hasThumbnail('a.webp', 10)).toBe(true);
    expect(hasThumbnail('a.png', THUMBNAIL_SOURCE_LIMIT + 1)).toBe(false);
    expect(hasThumbnail('a.png', 0)).toBe(false);
    expect(hasThumbnail('a.avif', 1000)).toBe(false);
    expect(hasThumbnail('notes.txt', 1000)).toBe(false);
  });
});
