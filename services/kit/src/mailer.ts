// Its own entry point (`@rowbase/kit/mailer`), not in kit's index: only identity and
// organization send mail, and loading nodemailer costs every other process a few MiB of memory.
import { createTransport } from "nodemailer";
import type { Logger } from "./logger.js";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
  close(): void;
}

/**
 * How long something a mail hands out stays valid, as its text says it: whole minutes in
 * minutes, any other lifetime (an operator's CODE_TTL_SECONDS of 90, or of 30) in seconds, which
 * rounding to minutes would misstate.
 */
export function lifetimeText(seconds: number): string {
  const [count, unit] = seconds % 60 === 0 ? [seconds / 60, "minute"] : [seconds, "second"];
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}

/**
 * Mail over SMTP (`smtp://user:pass@host:port`). Without an SMTP URL the mail is written to the
 * service log instead, which is meant for development only.
 */
export function createMailer(smtpUrl: string | undefined, from: string, logger: Logger): Mailer {
  if (!smtpUrl) {
    logger.warn("SMTP_URL is not set: e-mails are written to this log (development only)");
    return {
      async send(mail) {
        logger.info(
          { to: mail.to, subject: mail.subject },
          `mail (not sent, no SMTP_URL):\n${mail.text}`,
        );
      },
      close() {},
    };
  }
  const transport = createTransport(smtpUrl);
  return {
    async send(mail) {
      await transport.sendMail({ from, ...mail });
    },
    close() {
      transport.close();
    },
  };
}
