import type { TestSystem } from "@rowbase/standalone/testing";
import { expect } from "vitest";
import type { client } from "./http.js";

export const PASSWORD = "correct horse battery";

let counter = 0;
/** A fresh address for each user a test needs. */
export function newEmail(label = "person"): string {
  counter += 1;
  return `${label}${counter}.${process.pid}.${Date.now()}@example.test`;
}

export interface SignedUpUser {
  id: number;
  email: string;
  token: string;
  refreshToken: string;
}

/** Registers and verifies a user through the gateway, reading the code from the real SMTP catcher. */
export async function signUp(
  sys: TestSystem,
  api: ReturnType<typeof client>,
  email = newEmail(),
): Promise<SignedUpUser> {
  const before = sys.mail.messages.length;
  const registered = await api("POST", "/auth/register", {
    body: { email, password: PASSWORD, name: email.split("@")[0] },
  });
  expect(registered.status).toBe(200);
  const message = await sys.mail.next(email, before);
  const code = /code: (\d{6})/.exec(message.subject)![1]!;
  const verified = await api("POST", "/auth/verify_email", { body: { email, code } });
  expect(verified.status).toBe(200);
  const data = verified.body.data;
  return { id: data.user.id, email, token: data.access_token, refreshToken: data.refresh_token };
}
