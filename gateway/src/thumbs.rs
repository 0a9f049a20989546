//! Thumbnails of images: bytes in, a small JPEG (or PNG when the source has alpha) out. A pure
//! function over bytes, run on the blocking pool by `api/thumbnails.rs`, which reads the source,
//! bounds how many run at once and keeps the results (`meta/thumbs.rs`).
//!
//! Decoding is bounded before any pixel buffer is allocated: the `image` crate's [`Limits`]
//! refuse a declared width or height past [`MAX_SIDE`] and a decode needing more than
//! [`MAX_ALLOC`] bytes, so a tiny file declaring 60000x60000 pixels is refused from its header.

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::{DynamicImage, ImageDecoder, ImageError, ImageReader, Limits};

/// The boxes a thumbnail fits in (pixels, both sides); anything else is refused.
pub const SIZES: [u32; 3] = [64, 128, 256];
/// The box when the request names none.
pub const DEFAULT_SIZE: u32 = 128;
/// Largest source file read for a thumbnail.
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;
/// Widest or tallest image decoded.
pub const MAX_SIDE: u32 = 16_384;
/// Most bytes one decode may allocate (a 48-megapixel photo in RGB needs 144 MB).
pub const MAX_ALLOC: u64 = 192 * 1024 * 1024;
/// Thumbnails made at once per gateway (each may hold `MAX_SOURCE_BYTES + MAX_ALLOC`).
pub const CONCURRENT_JOBS: usize = 2;
/// JPEG quality of the thumbnails: small files, no visible blocks at these sizes.
const JPEG_QUALITY: u8 = 80;

/// Why no thumbnail can be made of some content. Every case is the content's: the same bytes
/// fail the same way again.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ThumbError {
    #[error("this file is not an image a thumbnail can be made of (JPEG, PNG, GIF or WebP)")]
    NotAnImage,
    #[error("this image is damaged or cut short and cannot be decoded")]
    Undecodable,
    #[error("this image is too large for a thumbnail: {0}")]
    TooLarge(String),
}

/// A made thumbnail.
#[derive(Debug, Clone)]
pub struct Thumbnail {
    pub data: Vec<u8>,
    /// `image/jpeg` or `image/png`.
    pub mime: &'static str,
    pub width: u32,
    pub height: u32,
}

fn limits() -> Limits {
    let mut l = Limits::default();
    l.max_image_width = Some(MAX_SIDE);
    l.max_image_height = Some(MAX_SIDE);
    l.max_alloc = Some(MAX_ALLOC);
    l
}

fn refusal(e: ImageError) -> ThumbError {
    match e {
        ImageError::Unsupported(_) => ThumbError::NotAnImage,
        ImageError::Limits(l) => ThumbError::TooLarge(format!(
            "{l} (at most {MAX_SIDE} pixels a side and {} MiB to decode)",
            MAX_ALLOC / (1024 * 1024)
        )),
        _ => ThumbError::Undecodable,
    }
}

/// A thumbnail of the image in `src` that fits a `size` x `size` box, its aspect ratio kept and
/// its EXIF orientation applied; never larger than the image itself. The first frame of an
/// animation. JPEG unless the source has an alpha channel (then PNG, keeping it).
pub fn make(src: &[u8], size: u32) -> Result<Thumbnail, ThumbError> {
    if src.len() as u64 > MAX_SOURCE_BYTES {
        return Err(ThumbError::TooLarge(format!("a file over {} MiB", MAX_SOURCE_BYTES / (1024 * 1024))));
    }
    let mut reader = ImageReader::new(Cursor::new(src)).with_guessed_format().map_err(|_| ThumbError::Undecodable)?;
    if reader.format().is_none() {
        return Err(ThumbError::NotAnImage);
    }
    let mut limits = limits();
    reader.limits(limits.clone());
    let mut decoder = reader.into_decoder().map_err(refusal)?;
    let (w, h) = decoder.dimensions();
    // `into_decoder` checks the sides; the buffer the decode fills is checked here, before it
    // exists (what `ImageReader::decode` does).
    limits.check_dimensions(w, h).map_err(refusal)?;
    limits.reserve(decoder.total_bytes()).map_err(refusal)?;
    let orientation = decoder.orientation().map_err(refusal)?;
    let mut img = DynamicImage::from_decoder(decoder).map_err(refusal)?;
    img.apply_orientation(orientation);

    let small = if img.width() > size || img.height() > size { img.thumbnail(size, size) } else { img };
    let mut data = Vec::new();
    let mime = if small.color().has_alpha() {
        small.to_rgba8().write_with_encoder(PngEncoder::new(&mut data)).map_err(refusal)?;
        "image/png"
    } else {
        small.to_rgb8().write_with_encoder(JpegEncoder::new_with_quality(&mut data, JPEG_QUALITY)).map_err(refusal)?;
        "image/jpeg"
    };
    Ok(Thumbnail { data, mime, width: small.width(), height: small.height() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

    fn encode(img: DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).expect("encode");
        out.into_inner()
    }

    fn decoded(t: &Thumbnail) -> DynamicImage {
        image::load_from_memory(&t.data).expect("the thumbnail decodes")
    }

    #[test]
    fn a_wide_jpeg_fits_the_box_with_its_aspect_ratio() {
        let src =
            encode(DynamicImage::ImageRgb8(RgbImage::from_pixel(800, 400, Rgb([200, 10, 10]))), ImageFormat::Jpeg);
        let t = make(&src, 128).expect("thumbnail");
        assert_eq!((t.mime, t.width, t.height), ("image/jpeg", 128, 64));
        let d = decoded(&t);
        assert_eq!((d.width(), d.height()), (128, 64));
        let px = d.to_rgb8().get_pixel(64, 32).0;
        assert!(px[0] > 150 && px[1] < 60, "the colour survives: {px:?}");
    }

    #[test]
    fn a_png_with_alpha_stays_png_with_alpha() {
        let src =
            encode(DynamicImage::ImageRgba8(RgbaImage::from_pixel(300, 600, Rgba([0, 0, 255, 100]))), ImageFormat::Png);
        let t = make(&src, 64).expect("thumbnail");
        assert_eq!((t.mime, t.width, t.height), ("image/png", 32, 64));
        let d = decoded(&t);
        assert!(d.color().has_alpha());
        assert_eq!(d.to_rgba8().get_pixel(10, 10).0[3], 100);
    }

    #[test]
    fn gif_and_webp_are_read() {
        for format in [ImageFormat::Gif, ImageFormat::WebP] {
            let src = encode(DynamicImage::ImageRgba8(RgbaImage::from_pixel(200, 100, Rgba([9, 9, 9, 255]))), format);
            let t = make(&src, 64).unwrap_or_else(|e| panic!("{format:?}: {e}"));
            assert_eq!((t.width, t.height), (64, 32), "{format:?}");
        }
    }

    #[test]
    fn a_small_image_is_not_enlarged() {
        let src = encode(DynamicImage::ImageRgb8(RgbImage::new(20, 10)), ImageFormat::Png);
        let t = make(&src, 256).expect("thumbnail");
        assert_eq!((t.width, t.height), (20, 10));
    }

    #[test]
    fn text_garbage_and_cut_images_are_refused() {
        assert_eq!(make(b"hello, this is text\n", 128).expect_err("text"), ThumbError::NotAnImage);
        assert_eq!(make(b"", 128).expect_err("empty"), ThumbError::NotAnImage);
        let png = encode(DynamicImage::ImageRgb8(RgbImage::new(64, 64)), ImageFormat::Png);
        assert_eq!(make(&png[..png.len() / 2], 128).expect_err("cut"), ThumbError::Undecodable);
        let mut broken = png.clone();
        for b in &mut broken[40..] {
            *b ^= 0x5a;
        }
        assert!(make(&broken, 128).is_err());
    }

    /// A PNG whose header declares `w` x `h` pixels, with one tiny compressed row of data.
    fn bomb(w: u32, h: u32) -> Vec<u8> {
        let real = encode(DynamicImage::ImageRgb8(RgbImage::new(1, 1)), ImageFormat::Png);
        let mut out = real.clone();
        out[16..20].copy_from_slice(&w.to_be_bytes());
        out[20..24].copy_from_slice(&h.to_be_bytes());
        // The IHDR chunk's CRC covers its type and data (bytes 12..29).
        let crc = crc32(&out[12..29]);
        out[29..33].copy_from_slice(&crc.to_be_bytes());
        out
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn a_decompression_bomb_is_refused_from_its_header() {
        for (w, h) in [(60_000, 60_000), (16_000, 16_000), (1, 100_000)] {
            match make(&bomb(w, h), 128) {
                Err(ThumbError::TooLarge(_)) => {}
                other => panic!("{w}x{h}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_oversized_source_is_refused_unread() {
        let big = vec![0u8; MAX_SOURCE_BYTES as usize + 1];
        assert!(matches!(make(&big, 128), Err(ThumbError::TooLarge(_))));
    }
}
